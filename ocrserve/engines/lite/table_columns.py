"""A table's columns from its line fragments: x ranges that the fragments cover, split by gutters
that (almost) no fragment crosses (a fragment over a gutter is a spanning cell, not a reason to merge
columns), and the columns each fragment covers. Every threshold is relative to the line height `lh`."""

from __future__ import annotations

from ocrserve.ingest.pdf.textlayer import Line


def gutters(cells: list[Line], n_rows: int, lh: float) -> list[tuple[float, float]]:
    """Columns: x ranges covered by fragments, split where at most a few rows cross."""
    x0, x1 = min(c.x0 for c in cells), max(c.x1 for c in cells)
    step = max(lh / 8, 0.25)
    n = int((x1 - x0) / step) + 2
    cover = [0] * n
    for c in cells:
        for k in range(int((c.x0 - x0) / step), min(int((c.x1 - x0) / step) + 1, n)):
            cover[k] += 1
    limit = max(1, int(0.25 * n_rows))  # spanning cells may cross a gutter
    min_gap = max(int(0.35 * lh / step), 1)
    cols: list[tuple[float, float]] = []
    start = None
    k = 0
    while k < n:
        if cover[k] > 0 and start is None:
            start = k
        if start is not None and cover[k] <= limit:
            e = k
            while e < n and cover[e] <= limit:
                e += 1
            if e - k >= min_gap or e >= n:
                # close the column before the gutter; ignore the lightly covered bins on its sides
                a = start
                while a < k and cover[a] <= limit:
                    a += 1
                if a < k:
                    cols.append((x0 + a * step, x0 + k * step))
                start = None
                k = e
                continue
        k += 1
    if start is not None:
        cols.append((x0 + start * step, x1))
    return cols


def span(l: Line, cols: list[tuple[float, float]]) -> list[int]:
    """Columns a fragment covers (by overlap), at least the one nearest its centre."""
    out = [k for k, (a, b) in enumerate(cols) if min(b, l.x1) - max(a, l.x0) > 0.3 * min(b - a, l.w) + 0.5]
    if not out:
        out = [min(range(len(cols)), key=lambda k: abs((cols[k][0] + cols[k][1]) / 2 - l.cx))]
    return out


def join_word_columns(cols: list[tuple[float, float]], run: list[list[Line]], gap: float) -> list[tuple[float, float]]:
    """Neighbouring columns that are words of one cell: on the rows that have both they are mostly less
    than `gap` apart (a word space, as OCR's word boxes measure it; never 1.5 times that), no row has the
    right one alone
    ("Item | 41" on every row of an OCR'd table is one column "Item 41")."""
    k = 0
    cols = list(cols)
    while k + 1 < len(cols):
        gaps, alone = [], False
        for row in run:
            left = [l for l in row if span(l, cols)[-1] == k]
            right = [l for l in row if span(l, cols)[0] == k + 1]
            if left and right:
                gaps.append(min(l.x0 for l in right) - max(l.x1 for l in left))
            elif right:
                alone = True
        if len(gaps) >= 2 and not alone and sorted(gaps)[len(gaps) // 2] < gap and max(gaps) < 1.5 * gap:
            cols[k : k + 2] = [(cols[k][0], cols[k + 1][1])]
            continue
        k += 1
    return cols
