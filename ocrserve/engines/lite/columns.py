"""Columns of a scanned page, and drop caps.

OCR's text detector joins the lines of two columns across a narrow gutter (justified text, a gutter
of less than an em): each box then runs across the page, and reading by boxes reads across the
columns. `split_columns` finds the gutters in the words (RapidOCR's word boxes): an x range that
the words of many lines leave empty while the lines themselves run over it, and cuts those lines
there; the gutters go to the reading order as cuts (ocrserve.engines.lite.order).

`drop_caps`: a large initial letter set beside the first lines of a paragraph is the first letter of
the line it stands beside, not a heading "S".
"""

from __future__ import annotations

from statistics import median

from ocrserve.engines.lite.grid import OcrLine
from ocrserve.ingest.pdf.textlayer import Line


def drop_caps(lines: list[Line]) -> list[Line]:
    """A lone capital two or more lines tall, right before (left of) the top line beside it, joins it."""
    if len(lines) < 3:
        return lines
    lh = median(l.h for l in lines)
    out = list(lines)
    for cap in lines:
        text = cap.text.strip()
        if not (len(text) == 1 and text.isalpha() and text.isupper() and cap.h >= 1.8 * lh and not cap.angle):
            continue
        beside = [
            l
            for l in out
            if l is not cap
            and 0 <= l.x0 - cap.x1 <= 1.5 * lh
            and cap.y0 - 0.5 * lh <= l.y0 <= cap.y1 - 0.5 * l.h
            and l.h < 0.7 * cap.h
        ]
        if not beside or not beside[0].text[:1].isalpha():
            continue
        first = min(beside, key=lambda l: l.y0)
        if not first.text[:1].islower() and not first.text[:1].isupper():
            continue
        first.text = text + first.text
        first.x0 = cap.x0
        if isinstance(first, OcrLine) and first.words:  # the cap's box is part of the first word's
            w = first.words
            first.words = ((text + w[0][0], cap.x0, w[0][2]), *w[1:])
        out.remove(cap)
    return out


def _gutters(lines: list[OcrLine], lh: float) -> list[tuple[float, float]]:
    """x ranges the words of many lines leave empty while those lines run over them."""
    worded = [l for l in lines if l.words and not l.angle]
    if len(worded) < 8:
        return []
    x0, x1 = min(l.x0 for l in worded), max(l.x1 for l in worded)
    step = max(lh / 8, 0.5)
    n = int((x1 - x0) / step) + 1
    over = [0] * n  # lines that run over the bin
    inked = [0] * n  # lines with a word on the bin
    for l in worded:
        for k in range(int((l.x0 - x0) / step), min(int((l.x1 - x0) / step) + 1, n)):
            over[k] += 1
        for _, a, b in l.words:
            for k in range(int((a - x0) / step), min(int((b - x0) / step) + 1, n)):
                inked[k] += 1
    need = max(4, int(0.25 * len(worded)))
    out: list[tuple[float, float]] = []
    k = 0
    while k < n:
        if over[k] >= need and inked[k] <= 0.05 * over[k]:
            e = k
            while e < n and over[e] >= need and inked[e] <= 0.05 * over[e]:
                e += 1
            if (e - k) * step >= 0.3 * lh:
                out.append((x0 + k * step, x0 + e * step))
            k = e
            continue
        k += 1
    return out


def split_columns(lines: list[Line]) -> tuple[list[Line], list[float]]:
    """OCR lines cut at the page's column gutters -> (lines, the gutters' middles)."""
    ocr = [l for l in lines if isinstance(l, OcrLine)]
    if len(ocr) < 8:
        return lines, []
    lh = median(l.h for l in ocr)
    cuts = [(a + b) / 2 for a, b in _gutters(ocr, lh)]
    if not cuts:
        return lines, []
    out: list[Line] = []
    for l in lines:
        words = getattr(l, "words", ())
        parts = [l]
        for x in cuts:
            last = parts[-1]
            lw = getattr(last, "words", ())
            if not (last.x0 < x < last.x1) or not lw:
                continue
            left = [w for w in lw if w[2] <= x]
            right = [w for w in lw if w[1] >= x]
            if not left or not right or len(left) + len(right) != len(lw):
                continue  # a word over the gutter: a line across the columns (a title)
            parts[-1:] = [_part(last, left, last.x0, x - 0.5), _part(last, right, x + 0.5, last.x1)]
        if len(parts) == 1 and words:  # a padded box reaching over a gutter its words stay clear of
            for x in cuts:
                if l.x0 < x < l.x1 and all(w[2] <= x for w in words):
                    l.x1 = x - 0.5
                elif l.x0 < x < l.x1 and all(w[1] >= x for w in words):
                    l.x0 = x + 0.5
        out += parts
    return out, cuts


def _part(l: Line, words: list[tuple[str, float, float]], x0: float, x1: float) -> OcrLine:
    return OcrLine(
        " ".join(w[0] for w in words), x0, l.y0, x1, l.y1, l.size, l.bold, l.score, l.angle, words=tuple(words)
    )
