"""Searchable PDF: the invisible text layer holds every block's text inside the block's box; pages
with a usable text layer keep theirs; the original pages render exactly as before."""

from __future__ import annotations

import base64
import io
import json
import re
import shutil
import time
from pathlib import Path

import pypdfium2 as pdfium
import pytest
from PIL import Image, ImageDraw

import ocrserve
from ocrserve import Document, Source, parse_output
from ocrserve.export.searchable_pdf import SearchablePdfError, searchable_pdf
from ocrserve.export.text_layout import layout_block
from ocrserve.ingest.pdf.textlayer import extract_chars
from ocrserve.labels import FIGURE_LABELS
from tests.support.helpers import start_chromium, stop_process, text_pdf

RAW = (
    '<div data-bbox="[100, 60, 700, 120]" data-label="Section-Header"><h2>Results of the survey</h2></div>'
    '<div data-bbox="[100, 150, 920, 380]" data-label="Text"><p>The quick brown fox jumps over the lazy dog, '
    "again and again, until the dog wakes up. Greek \u03a9mega, CJK \u6f22\u5b57 and an astral \U0001d49c "
    "letter all survive the round trip.</p></div>"
    '<div data-bbox="[100, 420, 920, 600]" data-label="Table"><table><tr><th>Name</th><th>Score</th></tr>'
    "<tr><td>alpha</td><td>12</td></tr><tr><td>beta</td><td>7</td></tr></table></div>"
    '<div data-bbox="[100, 640, 500, 900]" data-label="Image"><img alt="a red square standing for a photo"/></div>'
    '<div data-bbox="[560, 640, 920, 700]" data-label="Equation-Block"><math display="block">E = mc^2</math></div>'
)


def _norm(s: str) -> str:
    return re.sub(r"\s+", " ", s).strip()


def _flat(s: str) -> str:
    s = s.encode("utf-16-le", "surrogatepass").decode("utf-16-le")  # pdfium gives astral characters as two halves
    return re.sub(r"\s+", "", s)


def _scan(path: Path, size=(1000, 800), dpi=200) -> Path:
    img = Image.new("RGB", size, "white")
    d = ImageDraw.Draw(img)
    d.rectangle((100, 512, 500, 720), fill=(255, 0, 0))
    d.text((100, 60), "Results of the survey", fill="black")
    img.save(path, dpi=(dpi, dpi))
    return path


def _doc(path: Path, kind: str, pages) -> Document:
    return Document(source=Source(path=str(path), type=kind, page_count=len(pages)), pages=pages)


def _block_boxes(block, frame) -> tuple[float, float, float, float]:
    x0, y0, x1, y1 = block.bbox_norm
    return x0 * frame.width, y0 * frame.height, x1 * frame.width, y1 * frame.height


def check_layer(pdf_page, blocks) -> None:
    """Every non-figure block's text is in the page text, and the characters inside each block's
    box (scaled to the PDF page) are exactly that block's text; nothing lies outside the blocks."""
    chars, frame = extract_chars(pdf_page)
    solid = [c for c in chars if not c.generated and not c.text.isspace()]
    assert solid and all(c.invisible for c in solid)
    page_text = _norm(pdf_page.get_textpage().get_text_range())
    claimed = 0
    for b in blocks:
        x0, y0, x1, y1 = _block_boxes(b, frame)
        eps = 0.01
        inside = [c for c in solid if c.x0 >= x0 - eps and c.x1 <= x1 + eps and c.y0 >= y0 - eps and c.y1 <= y1 + eps]
        claimed += len(inside)
        if b.label in FIGURE_LABELS:
            assert inside == [], f"a figure's description is not on the page: {b.text!r}"
            continue
        assert _norm(b.text) in page_text or _flat(b.text) in _flat(page_text), b.text
        assert _flat("".join(c.text for c in inside)) == _flat(b.text), (b.label, b.text)
    assert claimed == len(solid), "characters outside every block"


def _render(page, scale=1.0) -> bytes:
    return page.render(scale=scale).to_pil().convert("RGB").tobytes()


def test_scanned_image_gets_a_text_layer_where_the_blocks_are(tmp_path):
    src = _scan(tmp_path / "scan.png")
    page = parse_output(RAW, "chandra-1", (1000, 800), unit="px")
    out = searchable_pdf(_doc(src, "png", [page]))
    pdf = pdfium.PdfDocument(out)
    assert len(pdf) == 1
    w, h = pdf[0].get_size()
    assert (round(w), round(h)) == (360, 288)  # 1000 x 800 px at 200 dpi
    check_layer(pdf[0], page.blocks)
    text = pdf[0].get_textpage().get_text_range()
    assert "\u03a9mega" in text and "\u6f22\u5b57" in text and "\U0001d49c" in text
    assert "Name Score" in _norm(text) and "alpha 12" in _norm(text)  # a table goes row by row
    assert "red square" not in text
    # the image is the page, pixel for pixel
    img = pdf[0].render(scale=200 / 72).to_pil().convert("RGB")
    assert abs(img.width - 1000) <= 1 and abs(img.height - 800) <= 1
    assert img.getpixel((300, 600)) == (255, 0, 0) and img.getpixel((700, 300)) == (255, 255, 255)


def test_jpeg_goes_in_unchanged(tmp_path):
    src = tmp_path / "scan.jpg"
    Image.open(_scan(tmp_path / "scan.png")).save(src, quality=80)  # no DPI: the default 150 applies
    page = parse_output(RAW, "chandra-1", (1000, 800), unit="px")
    out = searchable_pdf(_doc(src, "jpeg", [page]))
    assert src.read_bytes() in out  # the JPEG's bytes, not re-encoded
    pdf = pdfium.PdfDocument(out)
    assert [round(v) for v in pdf[0].get_size()] == [480, 384]
    check_layer(pdf[0], page.blocks)


def test_tiff_frames_become_pages(tmp_path):
    src = tmp_path / "two.tiff"
    frames = [Image.open(_scan(tmp_path / f"f{i}.png")).convert("RGB") for i in range(2)]
    frames[0].save(src, save_all=True, append_images=frames[1:], dpi=(200, 200))
    second = parse_output(RAW, "chandra-1", (1000, 800), index=1, unit="px")
    failed = parse_output("", "chandra-1", (1000, 800), index=0, unit="px")
    failed.status = "failed"
    out = pdfium.PdfDocument(searchable_pdf(_doc(src, "tiff", [failed, second])))
    assert len(out) == 2
    assert out[0].get_textpage().count_chars() == 0  # a failed page: the image alone
    check_layer(out[1], second.blocks)


def _mixed_pdf(tmp_path: Path) -> Path:
    """Page 1 born-digital (a text layer), page 2 a scan of it (an image, no text)."""
    born = text_pdf(tmp_path / "born.pdf", pages=1, title="Searchable")
    src = pdfium.PdfDocument(str(born))
    scan = src[0].render(scale=150 / 72).to_pil().convert("RGB")
    scan_pdf = tmp_path / "scan.pdf"
    scan.save(scan_pdf, resolution=150.0)
    out = pdfium.PdfDocument(str(born))
    out.import_pages(pdfium.PdfDocument(str(scan_pdf)))
    path = tmp_path / "mixed.pdf"
    out.save(str(path))
    return path


def test_pdf_text_page_kept_scanned_page_layered_with_lite(tmp_path):
    src = _mixed_pdf(tmp_path)
    [res] = ocrserve.convert([str(src)], engine="lite")
    doc = res.document
    assert len(doc.pages) == 2 and all(p.blocks for p in doc.pages)
    out = searchable_pdf(doc)
    before, after = pdfium.PdfDocument(str(src)), pdfium.PdfDocument(out)
    assert len(after) == 2
    # page 1 had a good text layer: the same text, no second layer
    assert after[0].get_textpage().get_text_range() == before[0].get_textpage().get_text_range()
    assert not any(c.invisible for c in extract_chars(after[0])[0])
    # page 2 was a scan: now it has the blocks' text inside their boxes
    assert before[1].get_textpage().count_chars() == 0
    check_layer(after[1], doc.pages[1].blocks)
    assert "quick brown fox" in after[1].get_textpage().get_text_range()
    # the original pages are untouched
    for i in range(2):
        assert _render(after[i]) == _render(before[i])


def test_image_region_without_text_gets_a_layer_the_text_keeps_its_own(tmp_path):
    """A born-digital page with a screenshot pasted in: only the blocks in the image get text."""
    from reportlab.lib.utils import ImageReader
    from reportlab.pdfgen import canvas

    shot = Image.new("RGB", (600, 300), "white")
    ImageDraw.Draw(shot).rectangle((20, 20, 580, 280), outline="black", width=4)
    src = tmp_path / "stamped.pdf"
    c = canvas.Canvas(str(src), pagesize=(612, 792))
    c.setFont("Helvetica", 12)
    for j in range(10):
        c.drawString(72, 720 - 16 * j, f"Line {j}: born-digital words with a real text layer.")
    c.drawImage(ImageReader(shot), 72, 200, width=400, height=200)  # y 392..592 from the top
    c.showPage()
    c.save()
    raw = (
        '<div data-bbox="[117, 85, 900, 285]" data-label="Text"><p>Line 0: born-digital words</p></div>'
        '<div data-bbox="[130, 510, 750, 730]" data-label="Text"><p>Words only in the screenshot</p></div>'
    )
    parsed = parse_output(raw, "chandra-1", (612, 792))
    before = pdfium.PdfDocument(str(src))
    out = pdfium.PdfDocument(searchable_pdf(_doc(src, "pdf", [parsed])))
    chars = [c for c in extract_chars(out[0])[0] if not c.generated and not c.text.isspace()]
    layer = "".join(c.text for c in chars if c.invisible)
    assert layer == _flat("Words only in the screenshot")  # the text-layer block gets no second copy
    x0, y0, x1, y1 = _block_boxes(parsed.blocks[1], extract_chars(out[0])[1])
    assert all(
        x0 - 0.01 <= c.x0 and c.x1 <= x1 + 0.01 and y0 - 0.01 <= c.y0 and c.y1 <= y1 + 0.01
        for c in chars
        if c.invisible
    )
    assert len(chars) - len(layer) == len(
        [c for c in extract_chars(before[0])[0] if not c.generated and not c.text.isspace()]
    )
    assert _render(out[0]) == _render(before[0])


def test_rotated_page_layer_lies_upright_in_the_boxes(tmp_path):
    src = tmp_path / "rotated.pdf"
    pdf = pdfium.PdfDocument.new()
    page = pdf.new_page(300, 500)
    page.set_rotation(90)  # displayed 500 x 300
    pdf.save(str(src))
    raw = (
        '<div data-bbox="[100, 100, 900, 300]" data-label="Text"><p>Sideways page, upright text</p></div>'
        '<div data-bbox="[100, 500, 600, 900]" data-label="Text"><p>Second block of words here</p></div>'
    )
    parsed = parse_output(raw, "chandra-1", (500, 300))
    out = pdfium.PdfDocument(searchable_pdf(_doc(src, "pdf", [parsed])))
    check_layer(out[0], parsed.blocks)
    assert "Sideways page, upright text" in _norm(out[0].get_textpage().get_text_range())


def test_layout_fits_the_box():
    box = (10.0, 20.0, 210.0, 80.0)
    lines = layout_block(["word " * 60, "short tail"], box)
    assert len(lines) >= 3
    assert all(box[0] <= ln.x0 and ln.x0 + ln.width <= box[2] + 1e-6 for ln in lines)
    assert lines[0].top == pytest.approx(20.0) and lines[-1].top + lines[-1].height == pytest.approx(80.0)
    assert _flat("".join(ln.text for ln in lines)) == _flat("word " * 60 + "short tail")
    assert layout_block(["text"], (0, 0, 0, 10)) == [] and layout_block([], box) == []


def test_missing_source_is_a_clear_error(tmp_path):
    page = parse_output(RAW, "chandra-1", (1000, 800), unit="px")
    with pytest.raises(SearchablePdfError, match="gone.png: no such file"):
        searchable_pdf(_doc(tmp_path / "gone.png", "png", [page]))
    bad = tmp_path / "bad.pdf"
    bad.write_bytes(b"%PDF-1.4 not really")
    with pytest.raises(SearchablePdfError, match="bad.pdf: cannot open the source PDF"):
        searchable_pdf(_doc(bad, "pdf", [page]))


# ---------------------------------------------------------------- Chromium's PDF viewer


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def _viewer_screenshot(pdf: Path, profile: Path, drawn) -> Image.Image:
    """Open the PDF in headless Chromium's viewer (DevTools protocol) and return the first
    screenshot for which drawn(image) holds (the last one after 90 s)."""
    import websocket

    proc, ws_url = start_chromium(CHROMIUM, profile, "1000,800")
    try:
        deadline = time.monotonic() + 90
        ws = websocket.create_connection(ws_url, timeout=30)
        ids = iter(range(1, 10**6))

        def call(method: str, **params):
            i = next(ids)
            ws.send(json.dumps({"id": i, "method": method, "params": params}))
            while True:
                msg = json.loads(ws.recv())
                if msg.get("id") == i:
                    return msg.get("result", {})

        call("Page.enable")
        call("Page.navigate", url=pdf.as_uri())
        img = None
        while time.monotonic() < deadline:
            shot = call("Page.captureScreenshot", format="png")  # empty while the page navigates
            if shot.get("data"):
                img = Image.open(io.BytesIO(base64.b64decode(shot["data"]))).convert("RGB")
                if drawn(img):
                    break
            time.sleep(0.3)
        ws.close()
        assert img is not None, "no screenshot of the PDF viewer"
        return img
    finally:
        stop_process(proc)


def test_opens_in_chromiums_pdf_viewer(tmp_path):
    assert CHROMIUM, "chromium is not installed: apt-get install -y chromium"
    src = _scan(tmp_path / "scan.png")
    page = parse_output(RAW, "chandra-1", (1000, 800), unit="px")
    out = tmp_path / "scan.pdf"
    out.write_bytes(searchable_pdf(_doc(src, "png", [page])))

    def red(img: Image.Image) -> bool:
        return any(r > 200 and g < 60 and b < 60 for _, (r, g, b) in img.getcolors(1 << 20))

    shot = _viewer_screenshot(out, tmp_path / "profile", red)
    assert red(shot), "the scan's red square is not drawn"
    assert (255, 255, 255) in {c for _, c in shot.getcolors(1 << 20)}  # the page
