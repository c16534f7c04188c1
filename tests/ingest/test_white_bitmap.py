"""The page's bitmap made white by numpy (ocrserve/ingest/pdf/bitmap.py) renders exactly what pypdfium2's own
bitmap, filled by pdfium, renders: the same bytes reach the fit and the model; only pdfium's fill is skipped."""

from __future__ import annotations

import numpy as np
import pypdfium2.raw as pdfium_c
import pytest

from ocrserve.imagesize import Budget, pdf_scale
from ocrserve.ingest import raster
from ocrserve.ingest.pdf.bitmap import white_bitmap
from ocrserve.ingest.pdf.document import open_pdf
from ocrserve.profiles import load_profile
from tests.support.pages import PAGES, edge_pdf


def _pdf(path):
    """Gray text, colour fills, a half-transparent shape, an image, a form field and a link annotation."""
    from reportlab.lib.colors import Color
    from reportlab.pdfgen import canvas

    w, h = PAGES["a4"]
    c = canvas.Canvas(str(path), pagesize=(w, h))
    for i in range(20):
        c.drawString(54, h - 60 - 18 * i, f"line {i}: the quick brown fox jumps over the lazy dog")
    c.setFillColorRGB(0.1, 0.5, 0.9)
    c.rect(300, 60, 80, 20, fill=1)
    c.setFillColor(Color(0.9, 0.1, 0.1, alpha=0.4))
    c.circle(200, 200, 60, fill=1, stroke=0)
    c.acroForm.textfield(name="f", value="filled-in value", x=54, y=120, width=200, height=20)
    c.linkURL("https://example.org", (54, 90, 200, 110), relative=0, thickness=1)
    c.showPage()
    c.save()
    return str(path)


def _render(path: str, scale: float, **kw) -> np.ndarray:
    page = open_pdf(path, None, cache="test-white")[0]
    try:
        return (
            page.render(scale=scale, may_draw_forms=True, draw_annots=True, rev_byteorder=True, **kw).to_numpy().copy()
        )
    finally:
        page.close()


@pytest.mark.parametrize("kind", ["mixed", "edge"])
@pytest.mark.parametrize("profile", ["chandra-1", "chandra-2"])
def test_the_white_bitmap_renders_what_pdfiums_fill_renders(tmp_path, kind, profile):
    path = _pdf(tmp_path / "m.pdf") if kind == "mixed" else str(edge_pdf(tmp_path / "e.pdf", PAGES["letter"]))
    budget = Budget.from_profile(load_profile(profile))
    w, h = PAGES["a4"] if kind == "mixed" else PAGES["letter"]
    scale = pdf_scale(w, h, budget)
    theirs = _render(path, scale)
    ours = _render(path, scale, bitmap_maker=white_bitmap)
    assert ours.shape == theirs.shape and ours.dtype == theirs.dtype
    assert np.array_equal(ours, theirs)
    assert (theirs != 255).any() and (theirs == 255).any()  # a page with ink and paper


@pytest.mark.parametrize("fill", [(0, 0, 0, 255), (10, 200, 30, 255), (255, 255, 255, 128)])
def test_another_fill_colour_is_still_pdfiums(tmp_path, fill):
    path = _pdf(tmp_path / "m.pdf")
    theirs = _render(path, 1.0, fill_color=fill)
    ours = _render(path, 1.0, fill_color=fill, bitmap_maker=white_bitmap)
    assert np.array_equal(ours, theirs)


def test_the_renderer_leaves_the_fill_to_numpy(tmp_path, monkeypatch):
    """pdf_page_pixels no longer asks pdfium to fill the bitmap (its pixels are held above and by the
    fidelity tests); fails on the renderer before pdf/bitmap.py, which let pdfium fill every page."""
    path = _pdf(tmp_path / "m.pdf")
    calls = []
    real = pdfium_c.FPDFBitmap_FillRect
    monkeypatch.setattr(pdfium_c, "FPDFBitmap_FillRect", lambda *a: calls.append(a) or real(*a))
    a, _, _ = raster.pdf_page_pixels(path, 0, Budget.from_profile(load_profile("chandra-1")))
    raster.forget(path)
    assert a.size and calls == []
