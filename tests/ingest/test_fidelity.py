"""The image the model sees, held against Chandra's own client (`chandra-ocr` 0.1.8 for Chandra 1, 0.2.0
for Chandra 2) on a generated corpus of page and image kinds: the pixels ocrserve sends must equal the
pixels upstream sends (so the server's resize to its patch grid gives the model the same input), for
every profile. Where ocrserve differs on purpose, the test says so and checks the difference:

- EXIF orientation is applied (upstream sends a phone photo as stored, often sideways): ocrserve's image
  equals upstream's made from the upright photo;
- every TIFF frame is a page (upstream reads the first): frame 0 equals upstream's;
- 16-bit gray is scaled to 8 bits (Pillow's convert("RGB") clips it to white for upstream).
"""

from __future__ import annotations

import io
import math

import numpy as np
import pytest
from PIL import Image

from ocrserve.imagesize import Budget, server_size
from ocrserve.ingest.raster import forget, open_source, render_page
from ocrserve.profiles import load_profile
from tests.support.pages import PAGES, edge_pdf, scan
from tests.support.upstream import RELEASE, client

PROFILES = ("chandra-1", "chandra-2")


def _ours(path, profile):
    prof = load_profile(profile)
    info = open_source(str(path), None, 10**9)
    pages = []
    for i in range(info.page_count):
        rp = render_page(str(path), info.type, i, Budget.from_profile(prof), None, 10**9)
        pages.append(np.asarray(Image.open(io.BytesIO(rp.png)).convert("RGB")))
    forget(str(path))
    return pages


def _upstream(path, profile, pdf):
    up = client(RELEASE[profile])
    images = up.input.load_pdf_images(str(path), []) if pdf else [up.input.load_image(str(path))]
    return [np.asarray(up.util.scale_to_fit(im).convert("RGB")) for im in images]


def _same(ours: np.ndarray, theirs: np.ndarray, what: str) -> None:
    assert ours.shape == theirs.shape, (
        f"{what}: ocrserve sends {ours.shape[1]}x{ours.shape[0]}, upstream {theirs.shape[1]}x{theirs.shape[0]}"
    )
    assert np.array_equal(ours, theirs), (
        f"{what}: same size, different pixels (max diff {np.abs(ours.astype(int) - theirs.astype(int)).max()})"
    )


@pytest.mark.parametrize("profile", PROFILES)
@pytest.mark.parametrize("kind", sorted(PAGES))
def test_pdf_pages_reach_the_model_as_upstream_sends_them(tmp_path, profile, kind):
    path = edge_pdf(tmp_path / f"{kind}.pdf", PAGES[kind])
    ours, theirs = _ours(path, profile), _upstream(path, profile, pdf=True)
    _same(ours[0], theirs[0], f"{profile} {kind}")
    # the whole page: nothing cropped or padded (the edge text's dark pixels reach the bottom rows)
    assert (ours[0][-3:] < 128).any() and (ours[0][:, :3] < 128).any()


@pytest.mark.parametrize("profile", PROFILES)
def test_a_colour_pdf_page_reaches_the_model_as_upstream_sends_it(tmp_path, profile):
    """A gray page is fitted on one channel, a colour one in RGB: both must give upstream's pixels."""
    from reportlab.pdfgen import canvas

    path = tmp_path / "colour.pdf"
    c = canvas.Canvas(str(path), pagesize=PAGES["a4"])
    c.drawString(36, 700, "a page with a blue box and red text")
    c.setFillColorRGB(0.1, 0.4, 0.9)
    c.rect(36, 500, 200, 120, fill=1)
    c.setFillColorRGB(0.8, 0.1, 0.1)
    c.drawString(36, 480, "red text under the box")
    c.showPage()
    c.save()
    ours, theirs = _ours(path, profile), _upstream(path, profile, pdf=True)
    assert not np.array_equal(ours[0][..., 0], ours[0][..., 2])  # colour reached the model
    _same(ours[0], theirs[0], f"{profile} colour page")


@pytest.mark.parametrize("profile", PROFILES)
def test_form_fields_and_annotations_reach_the_model_as_upstream_flattens_them(tmp_path, profile):
    """Upstream flattens forms and annotations into the page before rendering: a filled text field, a
    checked box and a highlight show in the image exactly as upstream's (a page without any is not
    flattened, nor loaded again, here)."""
    import pypdfium2 as pdfium
    import pypdfium2.raw as pdfium_c
    from reportlab.pdfgen import canvas

    path = tmp_path / "form.pdf"
    c = canvas.Canvas(str(path), pagesize=PAGES["letter"])
    c.drawString(72, 720, "Name:")
    c.acroForm.textfield(name="name", value="Ada Lovelace", x=120, y=705, width=220, height=24)
    c.drawString(72, 660, "Agree:")
    c.acroForm.checkbox(name="agree", checked=True, x=120, y=652, size=20)
    c.showPage()
    c.save()
    doc = pdfium.PdfDocument(str(path))  # a highlight annotation beside the fields, its appearance by pdfium
    page = doc[0]
    annot = pdfium_c.FPDFPage_CreateAnnot(page.raw, pdfium_c.FPDF_ANNOT_SQUARE)
    pdfium_c.FPDFAnnot_SetColor(annot, pdfium_c.FPDFANNOT_COLORTYPE_Color, 200, 30, 30, 255)
    pdfium_c.FPDFAnnot_SetRect(annot, pdfium_c.FS_RECTF(360, 640, 520, 740))
    pdfium_c.FPDFPage_CloseAnnot(annot)
    page.close()
    doc.save(str(tmp_path / "form-annot.pdf"))
    doc.close()
    path = tmp_path / "form-annot.pdf"
    ours, theirs = _ours(path, profile), _upstream(path, profile, pdf=True)
    plain = pdfium.PdfDocument(str(path))[0].render(scale=2).to_numpy()  # not flattened: no field values
    flat = ours[0]
    assert (flat < 128).sum() > (np.asarray(plain) < 128).sum() * flat.size / plain.size  # the values were drawn
    _same(ours[0], theirs[0], f"{profile} form page")


# name: (size, mode, format) — scans at 150/200/300 dpi (Letter), screenshots, small images, long strips,
# gray, CMYK, palette, alpha
IMAGES = {
    "scan-150dpi": ((1275, 1650), "RGB", "PNG"),
    "scan-200dpi": ((1700, 2200), "L", "PNG"),
    "scan-300dpi": ((2550, 3300), "RGB", "JPEG"),
    "screenshot-1080p": ((1920, 1080), "RGB", "PNG"),
    "screenshot-1440p": ((2560, 1440), "RGB", "WEBP"),
    "small-800x600": ((800, 600), "RGB", "PNG"),
    "tiny-120x40": ((120, 40), "RGB", "PNG"),
    "strip-3000x200": ((3000, 200), "RGB", "PNG"),
    "strip-300x6000": ((300, 6000), "RGB", "PNG"),
    "cmyk": ((1200, 1600), "CMYK", "JPEG"),
    "palette": ((1000, 700), "P", "GIF"),
    "alpha": ((900, 1300), "RGBA", "PNG"),
    "gray-alpha": ((1600, 1000), "LA", "PNG"),
    "bmp": ((1024, 768), "RGB", "BMP"),
}


@pytest.mark.parametrize("profile", PROFILES)
@pytest.mark.parametrize("name", sorted(IMAGES))
def test_images_reach_the_model_as_upstream_sends_them(tmp_path, profile, name):
    size, mode, fmt = IMAGES[name]
    path = tmp_path / f"{name}.{fmt.lower()}"
    scan(size, mode).save(path, format=fmt, **({"quality": 90} if fmt in ("JPEG", "WEBP") else {}))
    _same(_ours(path, profile)[0], _upstream(path, profile, pdf=False)[0], f"{profile} {name}")


@pytest.mark.parametrize("profile", PROFILES)
def test_exif_rotation_is_applied_on_purpose(tmp_path, profile):
    """Deliberate: a phone photo stored sideways with EXIF orientation 6 reaches the model upright; upstream
    ignores the tag. ocrserve's image equals upstream's for the same photo stored upright."""
    upright = scan((1200, 1600))
    stored = upright.transpose(Image.Transpose.ROTATE_90)  # orientation 6: rotate 270 (CW 90) to view
    exif = Image.Exif()
    exif[0x0112] = 6
    path, plain = tmp_path / "phone.jpg", tmp_path / "upright.png"
    stored.save(path, format="JPEG", quality=95, exif=exif)
    Image.open(path).transpose(Image.Transpose.ROTATE_270).save(plain)  # the decoded photo, viewed upright
    ours = _ours(path, profile)[0]
    _same(ours, _upstream(plain, profile, pdf=False)[0], f"{profile} EXIF-rotated photo")
    assert ours.shape[0] > ours.shape[1]  # portrait, as the photo is viewed; upstream's is landscape
    assert _upstream(path, profile, pdf=False)[0].shape[1] > _upstream(path, profile, pdf=False)[0].shape[0]


@pytest.mark.parametrize("profile", PROFILES)
def test_every_tiff_frame_is_a_page_on_purpose(tmp_path, profile):
    path = tmp_path / "fax.tiff"
    frames = [scan((1700, 2200), "L"), scan((1600, 2100), "L")]
    frames[0].save(path, format="TIFF", save_all=True, append_images=frames[1:])
    ours = _ours(path, profile)
    assert len(ours) == 2  # upstream converts the first frame only
    _same(ours[0], _upstream(path, profile, pdf=False)[0], f"{profile} TIFF frame 0")


@pytest.mark.parametrize("profile", PROFILES)
def test_sixteen_bit_gray_is_scaled_not_clipped_on_purpose(tmp_path, profile):
    a = np.tile(np.linspace(0, 65535, 1600).astype(np.uint16), (1800, 1))
    path = tmp_path / "gray16.png"
    Image.fromarray(a).save(path)
    theirs = _upstream(path, profile, pdf=False)[0]
    ours = _ours(path, profile)[0]
    assert ours.shape == theirs.shape
    assert theirs.mean() > 250  # upstream's: nearly all white (values above 255 clip)
    assert 100 < ours.mean() < 155  # ours: the gradient, 0..255
    assert ours[:, :20].mean() < 20 and ours[:, -20:].mean() > 235


@pytest.mark.parametrize("profile", PROFILES)
def test_server_resize_then_gives_the_model_the_same_input(profile):
    """What the vision tower sees: the server's smart_resize of the sent image, on its 32-px grid, within the
    profile's server bounds (Chandra 2: upstream's launcher's min/max_pixels)."""
    b = Budget.from_profile(load_profile(profile))
    for w, h in ((1632, 2112), (1588, 2246), (2752, 1536), (28, 28), (3000, 200)):
        W, H = server_size(w, h, b)
        assert W % 32 == 0 and H % 32 == 0 and W * H <= b.server_max_pixels
        assert abs(W / H - w / h) / (w / h) < 0.25 or min(w, h) < 64
    # an A4 page at 192 dpi: upstream and ocrserve send 1588x2246; the server makes it 1600x2240
    assert server_size(1588, 2246, b) == (1600, 2240)
    assert math.isclose(server_size(1632, 2112, b)[0] / 1632, 1.0)
