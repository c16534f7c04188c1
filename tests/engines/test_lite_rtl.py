"""Right-to-left text layers (issue 30.1): Arabic and Hebrew PDFs made here with a TrueType font that has
the glyphs (DejaVu Sans). reportlab does not shape: the text is shaped here (letters in their joined
presentation forms, lam-alef ligatures) and drawn in visual order, as real PDFs store it; three ways a
content stream holds it (one string per line, a string per word, a glyph at a time right to left).
The lite engine's Markdown must hold the words in logical order."""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from pathlib import Path

import pypdfium2 as pdfium
import pytest
from reportlab.pdfbase import pdfmetrics
from reportlab.pdfbase.ttfonts import TTFont
from reportlab.pdfgen import canvas

from ocrserve import Document, Source, load_profile, parse_output, render_markdown
from ocrserve.engines.base import PageInput
from ocrserve.engines.lite.engine import lite_raw_for
from ocrserve.ingest.pdf.bidi import line_text, logical_units
from tests.ingest.test_office import SOFFICE

FONT = Path("/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf")
PROFILE = load_profile("chandra-1")

TITLE = "تقرير المشروع السنوي"
PARAS = [
    "يقدم هذا التقرير نتائج المشروع خلال العام الماضي ويشرح الخطوات التالية للفريق في المرحلة القادمة "
    "من العمل على تحسين جودة الخدمات المقدمة للمستخدمين في جميع المدن",
    "بلغ عدد المشاركين 1250 شخصا في عام 2024 وارتفعت نسبة الرضا إلى 87 بالمئة مقارنة بالعام السابق "
    "لا سيما في المناطق الريفية",
    "استخدم الفريق لغة Python ومكتبة PDF لمعالجة الوثائق وتحويلها إلى نصوص قابلة للبحث والتحليل",
]
HEBREW = "שלום עולם זהו מסמך בעברית עם 42 מילים"

_FORMS: dict[tuple[str, str], str] = {}
for _cp in range(0xFE70, 0xFEFF):
    _d = unicodedata.decomposition(chr(_cp)).split()
    if len(_d) == 2 and _d[0] in ("<isolated>", "<final>", "<initial>", "<medial>"):
        _FORMS[(chr(int(_d[1], 16)), _d[0][1:-1])] = chr(_cp)
_LAM_ALEF = {"\u0627": "\ufefb", "\u0623": "\ufef7", "\u0625": "\ufef9", "\u0622": "\ufef5"}  # isolated; +1 final


def _joins_left(c: str) -> bool:
    """A letter that connects to the letter after it (it has an initial form)."""
    return (c, "initial") in _FORMS


def _shape(word: str) -> str:
    """Arabic letters -> presentation forms by their neighbours (lam + alef as one ligature), logical order."""
    out: list[str] = []
    i = 0
    while i < len(word):
        c = word[i]
        after_joiner = i > 0 and _joins_left(word[i - 1])
        if c == "\u0644" and i + 1 < len(word) and word[i + 1] in _LAM_ALEF:
            lig = _LAM_ALEF[word[i + 1]]
            out.append(chr(ord(lig) + 1) if after_joiner else lig)
            i += 2
            continue
        if (c, "isolated") not in _FORMS:
            out.append(c)
            i += 1
            continue
        before_joiner = i + 1 < len(word) and (word[i + 1], "isolated") in _FORMS and _joins_left(c)
        form = (
            ("medial" if before_joiner else "final") if after_joiner else ("initial" if before_joiner else "isolated")
        )
        out.append(_FORMS.get((c, form), _FORMS[(c, "isolated")]))
        i += 1
    return "".join(out)


def _rtl(word: str) -> bool:
    return any(unicodedata.bidirectional(c) in ("R", "AL") for c in word)


def _visual_words(words: list[str]) -> list[str]:
    """A right-to-left line's words (logical order) -> its visual order, left to right: runs of
    left-to-right words (Latin, numbers) keep their order, everything else is mirrored."""
    runs: list[tuple[bool, list[str]]] = []
    for w in words:
        if runs and not _rtl(w) and not runs[-1][0]:
            runs[-1][1].append(w)
        else:
            runs.append((_rtl(w), [w]))
    out: list[str] = []
    for rtl, ws in reversed(runs):
        out += [_shape(w)[::-1] for w in reversed(ws)] if rtl else ws
    return out


def _wrap(text: str, font: str, size: float, width: float) -> list[list[str]]:
    lines: list[list[str]] = [[]]
    for w in text.split():
        if lines[-1] and pdfmetrics.stringWidth(" ".join([*lines[-1], w]), font, size) > width:
            lines.append([])
        lines[-1].append(w)
    return lines


def build_rtl_pdf(path: Path, mode: str) -> Path:
    """mode: "line" (a visual string per line), "word" (a string per word, left to right), "glyph" (one
    glyph at a time, from the right: the content stream in logical order)."""
    pdfmetrics.registerFont(TTFont("DejaVuRTL", str(FONT)))
    c = canvas.Canvas(str(path), pagesize=(595, 842))
    right, width, y = 540.0, 470.0, 780.0

    def draw(words: list[str], size: float) -> None:
        nonlocal y
        c.setFont("DejaVuRTL", size)
        vis = _visual_words(words) if any(_rtl(w) for w in words) else words
        sp = pdfmetrics.stringWidth(" ", "DejaVuRTL", size)
        if mode == "line":
            c.drawRightString(right, y, " ".join(vis))
        elif mode == "word":
            x = right - pdfmetrics.stringWidth(" ".join(vis), "DejaVuRTL", size)
            for w in vis:
                c.drawString(x, y, w)
                x += pdfmetrics.stringWidth(w, "DejaVuRTL", size) + sp
        else:
            x = right
            for w in reversed(vis):
                for g in reversed(w) if _rtl(w) else [w]:
                    gw = pdfmetrics.stringWidth(g, "DejaVuRTL", size)
                    c.drawString(x - gw, y, g)
                    x -= gw
                x -= sp
        y -= size * 1.45

    draw(TITLE.split(), 20)
    y -= 10
    for p in [*PARAS, HEBREW]:
        for ln in _wrap(p, "DejaVuRTL", 12, width):
            draw(ln, 12)
        y -= 10
    c.showPage()
    c.save()
    return path


def _words(text: str) -> Counter:
    return Counter(re.findall(r"\w+", unicodedata.normalize("NFKC", text)))


def word_f1(got: str, want: str) -> float:
    g, w = _words(got), _words(want)
    tp = sum((g & w).values())
    if not tp:
        return 0.0
    p, r = tp / sum(g.values()), tp / sum(w.values())
    return 2 * p * r / (p + r)


def _markdown(path: Path, index: int = 0) -> str:
    """One page of a PDF through the lite engine, as Markdown."""
    doc = pdfium.PdfDocument(str(path))
    w, h = doc[index].get_size()
    img = doc[index].render(scale=1).to_pil().convert("RGB")
    doc.close()
    page = PageInput(
        doc_id=path.stem, index=index, image=img, width=w, height=h, unit="pt", source_path=str(path), source_type="pdf"
    )
    parsed = parse_output(lite_raw_for(page), PROFILE, (w, h), index=index)
    return render_markdown(Document(source=Source(path=str(path), type="pdf", page_count=1), pages=[parsed]))


@pytest.mark.skipif(not FONT.is_file(), reason="DejaVu Sans (fonts-dejavu-core) is not installed")
@pytest.mark.parametrize("mode", ["line", "word", "glyph"])
def test_rtl_text_layer_reads_in_logical_order(tmp_path, mode):
    md = _markdown(build_rtl_pdf(tmp_path / f"rtl-{mode}.pdf", mode))
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
        vis = " ".join(_visual_words(logical.split()))
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
    md = _markdown(tmp_path / "rtl.pdf")
    assert word_f1(md, "\n".join([*PARAS, HEBREW])) >= 0.95, md
    assert "\u0644\u0627 \u0633\u064a\u0645\u0627" in md  # lam-alef as one glyph: "la siyyama"
