"""An Arabic text layer with some glyphs pdfium cannot map (an ornament font's border, '\ufffd' from its
ToUnicode) is still read (#30.1, found on the held-out set: a whole page went to OCR, whose models do
not read Arabic, and came out as its Latin words only). A Latin layer as poor still goes to OCR."""

from __future__ import annotations

import dataclasses

import pypdfium2 as pdfium
import pytest

from ocrserve.ingest.pdf import textlayer
from tests.support.helpers import letter_canvas
from tests.support.lite import BODY, paragraph
from tests.support.rtl import FONT, build_rtl_pdf


@pytest.fixture
def unmapped(monkeypatch):
    """Text layers read as if a fifth of their characters had no Unicode mapping."""
    real = textlayer.text_quality

    def poor(text: str):
        return dataclasses.replace(real(text), valid_ratio=0.8)

    monkeypatch.setattr(textlayer, "text_quality", poor)


def _verdict(path) -> tuple[str, list]:
    doc = pdfium.PdfDocument(str(path))
    try:
        report = textlayer.analyze_page(doc[0])
        return report.verdict, report.lines
    finally:
        doc.close()


@pytest.mark.skipif(not FONT.is_file(), reason="DejaVu Sans (fonts-dejavu-core) is not installed")
def test_rtl_layer_with_unmapped_glyphs_is_kept(tmp_path, unmapped):
    verdict, lines = _verdict(build_rtl_pdf(tmp_path / "rtl.pdf", "line"))
    assert verdict == "text" and lines


def test_latin_layer_as_poor_goes_to_ocr(tmp_path, unmapped):
    c = letter_canvas(tmp_path / "latin.pdf")
    paragraph(c, BODY * 3)
    c.save()
    assert _verdict(tmp_path / "latin.pdf")[0] == "ocr_page"
