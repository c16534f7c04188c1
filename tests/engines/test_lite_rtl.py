"""Right-to-left text layers (issue 30.1): Arabic and Hebrew PDFs made by tests/support/rtl.py with a TrueType
font that has the glyphs (DejaVu Sans), shaped there and drawn in visual order, as real PDFs store it; three
ways a content stream holds it (one string per line, a string per word, a glyph at a time right to left).
The lite engine's Markdown must hold the words in logical order."""

from __future__ import annotations

import re
import unicodedata

import pytest

from ocrserve.ingest.pdf.bidi import line_text, logical_units
from tests.support.lite import pdf_markdown, word_f1
from tests.support.office import SOFFICE
from tests.support.rtl import FONT, HEBREW, PARAS, TITLE, build_rtl_pdf, visual_words


@pytest.mark.skipif(not FONT.is_file(), reason="DejaVu Sans (fonts-dejavu-core) is not installed")
@pytest.mark.parametrize("mode", ["line", "word", "glyph"])
def test_rtl_text_layer_reads_in_logical_order(tmp_path, mode):
    md = pdf_markdown(build_rtl_pdf(tmp_path / f"rtl-{mode}.pdf", mode))
    source = "\n".join([TITLE, *PARAS, HEBREW])
    assert word_f1(md, source) >= 0.9, md
    # whole paragraphs in order: each paragraph's text is in the Markdown as one run of words
    flat = " ".join(md.split())
    for p in PARAS:
        assert " ".join(p.split()) in flat, (p, md)
    assert HEBREW in flat
    assert re.search(rf"^#+ {TITLE}$", md, re.M), md


def test_visual_order_lines_are_turned_to_logical_order():
    """A text layer that hands a line's characters over in visual order (left to right), unlike pdfium."""

    class C:
        def __init__(self, text: str, x0: float):
            self.text, self.x0, self.x1 = text, x0, x0 + 8.0

    def visual_chars(logical: str) -> list[C]:
        vis = " ".join(visual_words(logical.split()))
        return [C(ch, 10.0 * i) for i, ch in enumerate(vis)]

    for logical in ["على 25 صفحة من عام 2024", "نستخدم لغة Python 3 في المشروع", HEBREW]:
        got = unicodedata.normalize("NFKC", line_text(visual_chars(logical)))
        assert got == logical
    # combining marks stay after their letter; a base-LTR line keeps its Latin order
    assert "".join(logical_units(["\u0628", "\u064e", "\u0643"])) == "\u0643\u0628\u064e"
    assert "".join(logical_units(list("see ملاس here"))) == "see سالم here"


def test_rtl_fragments_and_paragraph_ends():
    """Right-to-left lines: fragments of one row join right first; a paragraph whose short last line ends
    on the left (with a full stop) ends there; a list item's continuation is indented from the right."""
    from ocrserve.engines.lite.layout import build_blocks
    from ocrserve.ingest.pdf.textlayer import Line

    a, b = "الفقرة الأولى تبدأ هنا", "وتستمر في هذا السطر"
    lines = [
        Line(a, 300, 100, 500, 112, 10),  # the right half of one row, read first
        Line(b, 100, 100, 290, 112, 10),
        Line("وتنتهي هنا.", 380, 115, 500, 127, 10),  # short, ends on the left
        Line("الفقرة الثانية تبدأ في السطر التالي مباشرة", 100, 130, 500, 142, 10),
        Line("وتنتهي في هذا السطر الأخير من الصفحة", 150, 145, 500, 157, 10),
    ]
    html = [bl.html for bl in build_blocks(lines, 600, 800)]
    assert html[0] == f"<p>{a} {b} وتنتهي هنا.</p>", html
    assert len(html) == 2 and html[1].startswith("<p>الفقرة الثانية"), html


def test_glyph_of_two_letters_in_pdfium_order():
    """pdfium's reordering hands the letters of one RTL glyph (lam-alef mapped to lam and alef) over reversed."""

    class C:
        def __init__(self, text: str, x0: float, x1: float):
            self.text, self.x0, self.x1 = text, x0, x1

    # "لا سيما" as pdfium gives it: alef before lam, both with the ligature's box, then leftwards
    chars = [C("\u0627", 100, 108), C("\u0644", 100, 108), C(" ", 96, 100)]
    chars += [C(ch, 90 - 6 * i, 96 - 6 * i) for i, ch in enumerate("\u0633\u064a\u0645\u0627")]
    assert line_text(chars) == "\u0644\u0627 \u0633\u064a\u0645\u0627"


@pytest.mark.slow
def test_rtl_docx_through_libreoffice(tmp_path):
    """A right-to-left Word document as LibreOffice writes its PDF (HarfBuzz shaping, a glyph's letters in
    ToUnicode): its text in logical order."""
    import subprocess

    from docx import Document as Docx
    from docx.oxml import OxmlElement

    assert SOFFICE, "LibreOffice is not installed: apt-get install -y libreoffice-writer"
    d = Docx()
    for text in [*PARAS, HEBREW]:
        p = d.add_paragraph()
        p._p.get_or_add_pPr().append(OxmlElement("w:bidi"))
        run = p.add_run(text)
        run.font.name = "DejaVu Sans"
        run._r.get_or_add_rPr().append(OxmlElement("w:rtl"))
    d.save(str(tmp_path / "rtl.docx"))
    cmd = [SOFFICE, f"-env:UserInstallation=file://{tmp_path}/lo", "--headless", "--convert-to", "pdf"]
    subprocess.run([*cmd, "--outdir", str(tmp_path), str(tmp_path / "rtl.docx")], check=True, timeout=180)
    md = pdf_markdown(tmp_path / "rtl.pdf")
    assert word_f1(md, "\n".join([*PARAS, HEBREW])) >= 0.95, md
    assert "\u0644\u0627 \u0633\u064a\u0645\u0627" in md  # lam-alef as one glyph: "la siyyama"
