"""Right-to-left PDFs the tests make (issue 30.1): Arabic and Hebrew lines drawn with a TrueType font that
has the glyphs (DejaVu Sans). reportlab does not shape: the text is shaped here (letters in their joined
presentation forms, lam-alef ligatures) and drawn in visual order, as real PDFs store it."""

from __future__ import annotations

import unicodedata
from pathlib import Path

from reportlab.pdfbase import pdfmetrics
from reportlab.pdfbase.ttfonts import TTFont
from reportlab.pdfgen import canvas

FONT = Path("/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf")

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


def visual_words(words: list[str]) -> list[str]:
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
        vis = visual_words(words) if any(_rtl(w) for w in words) else words
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
