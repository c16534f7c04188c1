"""Fully vocalised Arabic PDFs the tests make (issue 30.1): every haraka (fatha, kasra, shadda, sukun, ...)
drawn as its own glyph over its letter, as TeX engines and typesetters of classical and Quranic text
store it; DejaVu Sans has the letters' joined forms and the marks. The content stream holds a word's
glyphs in visual order (left to right) or one at a time from the right, each mark drawn before or
after its letter."""

from __future__ import annotations

import unicodedata
from pathlib import Path

from reportlab.pdfbase import pdfmetrics
from reportlab.pdfbase.ttfonts import TTFont
from reportlab.pdfgen import canvas

from tests.support.rtl import FONT, _shape

VOCALISED = ["كَتَبَ الوَلَدُ الدَّرْسَ فِي البَيْتِ", "ذَهَبَ الطَّالِبُ إِلَى المَدْرَسَةِ مُبَكِّرًا", "قَالَ المُعَلِّمُ إِنَّ العِلْمَ نُورٌ"]
MODES = ("visual-mark-first", "visual-mark-after", "logical-mark-first", "logical-mark-after")


def _is_mark(ch: str) -> bool:
    return unicodedata.category(ch).startswith("M")


def _clusters(word: str) -> list[tuple[str, str]]:
    """A word -> (letter, its marks) in logical order."""
    out: list[tuple[str, str]] = []
    for ch in word:
        if _is_mark(ch) and out:
            out[-1] = (out[-1][0], out[-1][1] + ch)
        else:
            out.append((ch, ""))
    return out


def build_marks_pdf(path: Path, mode: str, size: float = 20.0) -> Path:
    """One line per VOCALISED sentence, right aligned; each mark a glyph centred over its letter."""
    pdfmetrics.registerFont(TTFont("DejaVuMarks", str(FONT)))
    c = canvas.Canvas(str(path), pagesize=(595, 842))
    c.setFont("DejaVuMarks", size)
    mark_w = pdfmetrics.stringWidth("\u0628", "DejaVuMarks", size) * 0.4
    visual, mark_first = mode.startswith("visual"), mode.endswith("first")
    y = 760.0
    for line in VOCALISED:
        x = 540.0
        glyphs: list[tuple[float, str, str]] = []  # (left edge, shaped letter, marks), logical order
        for n, word in enumerate(line.split()):
            cl = _clusters(word)
            shaped = _shape("".join(b for b, _ in cl))
            if len(shaped) != len(cl):  # a lam-alef ligature: keep the plain letters instead
                shaped = "".join(b for b, _ in cl)
            if n:
                x -= pdfmetrics.stringWidth(" ", "DejaVuMarks", size)
            for g, (_, marks) in zip(shaped, cl, strict=True):
                x -= pdfmetrics.stringWidth(g, "DejaVuMarks", size)
                glyphs.append((x, g, marks))
        for left, g, marks in reversed(glyphs) if visual else glyphs:
            gw = pdfmetrics.stringWidth(g, "DejaVuMarks", size)
            draw_marks = [(left + gw / 2 - mark_w / 2, m) for m in marks]
            if mark_first:
                for mx, m in draw_marks:
                    c.drawString(mx, y, m)
            c.drawString(left, y, g)
            if not mark_first:
                for mx, m in draw_marks:
                    c.drawString(mx, y, m)
        y -= size * 2
    c.showPage()
    c.save()
    return path
