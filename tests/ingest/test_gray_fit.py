"""A gray page is fitted (LANCZOS) on its one channel: exactly the pixels of fitting it in RGB, as Chandra's
client does, for a third of the work. Pillow resamples each channel of an RGB image with the same integer
kernel, rounding and clipping as an L image; these tests hold that over many images and sizes, and hold
the renderer to it (the differential tests against chandra-ocr are in test_fidelity.py)."""

from __future__ import annotations

import io

import numpy as np
import pytest
from PIL import Image

from ocrserve.imagesize import Budget
from ocrserve.ingest import raster, resize
from ocrserve.png import gray_channel
from ocrserve.profiles import load_profile

LANCZOS = Image.Resampling.LANCZOS
GRID = Budget(client_grid=28, min_pixels=28 * 28 * 4, max_pixels=28 * 28 * 6000)  # Chandra 2's kind of fit


def _gray_images(rng: np.random.Generator):
    """Noise, hard 0/255 edges (LANCZOS overshoots: the clipping is exercised), gradients, text-like pages."""
    for _ in range(6):
        h, w = int(rng.integers(3, 260)), int(rng.integers(3, 260))
        yield rng.integers(0, 256, (h, w), dtype=np.uint8)
        yield (rng.integers(0, 2, (h, w), dtype=np.uint8) * 255).astype(np.uint8)
        yy, xx = np.mgrid[0:h, 0:w]
        yield ((xx * 7 + yy * 3) % 256).astype(np.uint8)
        page = np.full((h, w), 255, np.uint8)
        page[rng.integers(0, h, 40), :] = 0
        yield page


def _sizes(rng: np.random.Generator, w: int, h: int):
    """Down and up in each direction, one side kept, the 28-px grid's small changes."""
    yield max(1, w // 2), max(1, h // 3)
    yield w * 2 + 1, h + 5
    yield max(1, w - 1), h * 3
    yield w, max(1, h - 2)
    yield w + 3, h
    yield int(rng.integers(1, 400)), int(rng.integers(1, 400))


def test_lanczos_of_one_gray_channel_equals_each_channel_of_the_rgb_resize():
    rng = np.random.default_rng(28)
    cases = 0
    for g in _gray_images(rng):
        rgb = Image.fromarray(np.repeat(g[..., None], 3, axis=2), "RGB")
        for size in _sizes(rng, g.shape[1], g.shape[0]):
            want = np.asarray(rgb.resize(size, LANCZOS))
            got = np.asarray(Image.fromarray(g, "L").resize(size, LANCZOS))
            for c in range(3):
                assert np.array_equal(got, want[..., c]), (g.shape, size, c)
            cases += 1
    assert cases >= 100


def test_gray_channel_finds_gray_pages_and_no_other():
    rng = np.random.default_rng(5)
    g = rng.integers(0, 256, (301, 97), dtype=np.uint8)
    a = np.repeat(g[..., None], 3, axis=2)
    one = gray_channel(a)
    assert one is not None and one.flags.c_contiguous and np.array_equal(one, g)
    for y, x, c in ((0, 0, 1), (300, 96, 2), (150, 40, 0), (299, 0, 1)):
        b = a.copy()
        b[y, x, c] ^= 1
        assert gray_channel(b) is None, (y, x, c)


def test_a_gray_page_is_fitted_on_one_channel_with_the_rgb_resize_pixels():
    rng = np.random.default_rng(7)
    for g in list(_gray_images(rng))[:12]:
        a = np.repeat(g[..., None], 3, axis=2)
        out = raster.fit_pixels(a, GRID)
        size = raster.client_fit_size(a.shape[1], a.shape[0], GRID)
        if size == (g.shape[1], g.shape[0]):
            assert out is a  # nothing to fit: the pixels as they are
            continue
        assert out.ndim == 2 and (out.shape[1], out.shape[0]) == size  # one channel: a third of the work
        want = np.asarray(Image.fromarray(a, "RGB").resize(size, LANCZOS))
        assert np.array_equal(np.repeat(out[..., None], 3, axis=2), want), g.shape


def test_a_colour_page_is_fitted_in_rgb():
    rng = np.random.default_rng(9)
    g = rng.integers(0, 256, (233, 181), dtype=np.uint8)
    a = np.repeat(g[..., None], 3, axis=2)
    a[-1, -1] = (255, 0, 0)  # one coloured pixel, in the last row
    out = raster.fit_pixels(a, GRID)
    size = raster.client_fit_size(181, 233, GRID)
    assert out.shape == (size[1], size[0], 3)
    assert np.array_equal(out, np.asarray(Image.fromarray(a, "RGB").resize(size, LANCZOS)))


def _pdf(path, colour: bool):
    from reportlab.pdfgen import canvas

    c = canvas.Canvas(str(path), pagesize=(612, 792))
    for i in range(30):
        c.drawString(54, 740 - 20 * i, f"line {i}: the quick brown fox jumps over the lazy dog")
    if colour:
        c.setFillColorRGB(0.1, 0.5, 0.9)
        c.rect(300, 60, 80, 20, fill=1)
    c.showPage()
    c.save()
    return str(path)


@pytest.mark.parametrize("colour", [False, True])
def test_a_pdf_page_fitted_to_the_grid_is_the_rgb_fit_of_the_whole_render(tmp_path, colour):
    """Chandra 2's page: the same pixels as rendering in RGB and resizing in RGB (upstream's way); a gray
    page comes back as one channel and is written as a gray PNG, a colour page stays RGB."""
    from ocrserve.imagesize import pdf_scale
    from ocrserve.ingest.pdf.document import open_pdf

    budget = Budget.from_profile(load_profile("chandra-2"))
    path = _pdf(tmp_path / "p.pdf", colour)
    a, w, h = raster.pdf_page_pixels(path, 0, budget)
    assert a.ndim == (3 if colour else 2)

    page = open_pdf(path, None)[0]
    whole = page.render(scale=pdf_scale(w, h, budget), may_draw_forms=True, draw_annots=True).to_pil().convert("RGB")
    page.close()
    raster.forget(path)
    size = raster.client_fit_size(whole.width, whole.height, budget)
    assert size != whole.size  # the fit resizes this page
    want = np.asarray(whole.resize(size, LANCZOS))
    rp = raster.render_pdf_page(path, 0, budget)
    img = Image.open(io.BytesIO(rp.png))
    assert img.mode == ("RGB" if colour else "L")
    assert np.array_equal(np.asarray(img.convert("RGB")), want)
    raster.forget(path)


@pytest.mark.parametrize("mode", ["L", "1", "I;16"])
def test_a_gray_image_file_is_fitted_on_one_channel(tmp_path, monkeypatch, mode):
    """A gray scan (L, bilevel, 16-bit) stays one channel through the upscale and the fit; its pixels are
    those of upstream's convert("RGB") then resize (16-bit: scaled to 8 bits first, a deliberate difference)."""
    rng = np.random.default_rng(3)
    g = rng.integers(0, 256, (700, 500), dtype=np.uint8)
    src = Image.fromarray(g, "L")
    if mode == "1":
        src = src.convert("1")
    elif mode == "I;16":
        src = Image.fromarray(g.astype(np.uint16) * 257)
    path = tmp_path / "scan.png"
    src.save(path)
    budget = Budget.from_profile(load_profile("chandra-2"))
    modes: list[str] = []
    lanczos_image = resize.lanczos_image

    def spy(img, size):
        modes.append(img.mode)
        return lanczos_image(img, size)

    monkeypatch.setattr(resize, "lanczos_image", spy)
    rp = raster.render_image_page(str(path), 0, budget, 10**9)
    assert modes == ["L", "L"]  # the upscale (500 px < 1536) and the fit, each on one channel
    monkeypatch.undo()
    img = Image.open(io.BytesIO(rp.png))
    assert img.mode == "L"
    rgb = raster.to_rgb(Image.open(path))
    assert rgb.mode == "RGB"
    want = raster.image_page(rgb, budget)
    assert want.mode == "RGB" and np.array_equal(np.asarray(img.convert("RGB")), np.asarray(want))
