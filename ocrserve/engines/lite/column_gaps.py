"""Column gutters of a scanned page that the OCR boxes' padding hides.

RapidOCR pads each box by a fraction of its height, so the boxes of two columns of running text sit
closer than their ink: across a gutter of one and a half ems, the boxes of a line and of the line beside
it may be less than a line height apart, and a larger box beside it (a bold heading in one column, set
in a bigger font) closes the gap further. The reading order's vertical cut (ocrserve.engines.lite.order)
then finds no gap that wide over the whole band, and reads the two columns across, line by line.

`ink_gutters` measures the gap on the words' ink (RapidOCR's word boxes): where rows of running text,
side by side, leave the same x range free of ink, at least a line height wide, in three rows or more,
that x is a column gutter; it goes to the reading order as a hint (a cut wherever the boxes leave any
gap there), as the gutters of ocrserve.engines.lite.columns do, and a padded box reaching over it while
its words stay clear of it ends there (`trim`). Rows of short cells (tables, key/value rows) give none:
both sides must be running text.
"""

from __future__ import annotations

from collections.abc import Sequence

from ocrserve.engines.lite.grid import OcrLine, _sentence
from ocrserve.ingest.pdf.textlayer import Line

MIN_ROWS = 3  # rows of running text side by side that must agree on a gutter


def _rows(lines: list[OcrLine]) -> list[list[OcrLine]]:
    rows: list[list[OcrLine]] = []
    for l in sorted(lines, key=lambda l: l.cy):
        for r in rows[-3:]:
            a = r[0]
            if min(a.y1, l.y1) - max(a.y0, l.y0) >= 0.5 * min(a.h, l.h):
                r.append(l)
                break
        else:
            rows.append([l])
    return [sorted(r, key=lambda l: l.x0) for r in rows]


def ink_gutters(lines: list[Line], lh: float, known: Sequence[float] = ()) -> list[float]:
    """x positions of column gutters between rows of running text, measured on the words' ink (not
    within a line height of a `known` gutter)."""
    worded = [l for l in lines if isinstance(l, OcrLine) and l.words and not l.angle]
    gaps: list[tuple[float, float]] = []  # ink-free x ranges between two lines of running text on one row
    for row in _rows(worded):
        for a, b in zip(row, row[1:]):
            if b.x0 < a.x1 - 0.5 * lh or not (_sentence(a.text) and _sentence(b.text)):
                continue
            g0, g1 = max(w[2] for w in a.words), min(w[1] for w in b.words)
            if g1 - g0 >= 0.8 * lh:
                gaps.append((g0, g1))
    out: list[float] = []
    while gaps:  # the x most rows leave free, then the next among the rows it does not explain
        agree = max(([g for g in gaps if g[0] <= x <= g[1]] for x, _ in gaps), key=len)
        if len(agree) < MIN_ROWS:
            break
        mid = (max(g[0] for g in agree) + min(g[1] for g in agree)) / 2
        if all(abs(mid - k) > lh for k in known):
            out.append(mid)
        gaps = [g for g in gaps if not g[0] <= mid <= g[1]]
    return out


def trim(lines: list[Line], gutters: Sequence[float]) -> None:
    """A padded box over a gutter whose words all stay on one side of it ends (starts) at the gutter."""
    for l in lines:
        words = l.words if isinstance(l, OcrLine) else ()
        for x in gutters:
            if words and l.x0 < x < l.x1 and all(w[2] <= x for w in words):
                l.x1 = x - 0.5
            elif words and l.x0 < x < l.x1 and all(w[1] >= x for w in words):
                l.x0 = x + 0.5
