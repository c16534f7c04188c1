"""Reading order of a page's items (lines, tables, figures) by recursive XY-cut.

A vertical cut where a gutter separates at least two items on each side; else the node is cut
into horizontal bands, and consecutive bands that share a gutter are kept together (so two columns
are read column by column even where their paragraph gaps happen to line up). Items are anything
with a box (x0, y0, x1, y1); lines weigh 1, tables and figures 2.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ocrserve.ingest.pdf.textlayer import Line

Item = Any


def vfrac_overlap(a: Item, b: Item) -> float:
    ov = min(a.y1, b.y1) - max(a.y0, b.y0)
    return ov / max(min(a.y1 - a.y0, b.y1 - b.y0), 1e-6)


def _weight(it: Item) -> int:
    return 1 if isinstance(it, Line) else 2


def _vertical_cuts(items: list[Item], min_gap: float, hints: Sequence[float] = ()) -> list[float]:
    ivs = sorted((it.x0, it.x1) for it in items)
    gaps: list[tuple[float, float]] = []
    end = ivs[0][1]
    for a, b in ivs[1:]:
        if a - end >= min_gap or (a > end and any(end <= x <= a for x in hints)):
            gaps.append((end, a))
        end = max(end, b)
    cuts = []
    for g0, g1 in gaps:
        left = sum(_weight(it) for it in items if it.x1 <= g0 + 1e-6)
        right = sum(_weight(it) for it in items if it.x0 >= g1 - 1e-6)
        if left >= 2 and right >= 2:
            cuts.append((g0 + g1) / 2)
    return cuts


def _y_bands(items: list[Item]) -> list[list[Item]]:
    srt = sorted(items, key=lambda it: it.y0)
    bands: list[list[Item]] = [[srt[0]]]
    end = srt[0].y1
    for it in srt[1:]:
        if it.y0 > end:
            bands.append([it])
        else:
            bands[-1].append(it)
        end = max(end, it.y1)
    return bands


def leaf_order(items: list[Item]) -> list[Item]:
    rows: list[list[Item]] = []
    for it in sorted(items, key=lambda i: (i.y0 + i.y1) / 2):
        if rows and vfrac_overlap(rows[-1][0], it) >= 0.5:
            rows[-1].append(it)
        else:
            rows.append([it])
    return [it for r in rows for it in sorted(r, key=lambda i: i.x0)]


def reading_order(items: list[Item], min_gap: float, depth: int = 0, hints: Sequence[float] = ()) -> list[Item]:
    """Recursive XY-cut with gutter-aware band grouping. `hints`: x positions of known column gutters
    (ocrserve.engines.lite.columns), cut wherever nothing crosses them, however narrow the gap."""
    if len(items) <= 1 or depth > 60:
        return leaf_order(items)
    cuts = _vertical_cuts(items, min_gap, hints)
    if cuts:
        edges = [-float("inf"), *cuts, float("inf")]
        out: list[Item] = []
        for a, b in zip(edges, edges[1:]):
            col = [it for it in items if a <= (it.x0 + it.x1) / 2 < b]
            out += reading_order(col, min_gap, depth + 1, hints) if len(col) < len(items) else leaf_order(col)
        return out
    bands = _y_bands(items)
    if len(bands) == 1:
        return leaf_order(items)
    groups: list[list[Item]] = []
    for band in bands:
        if groups and _vertical_cuts(groups[-1] + band, min_gap, hints):
            groups[-1] = groups[-1] + band
        else:
            groups.append(list(band))
    out = []
    for g in groups:
        out += reading_order(g, min_gap, depth + 1, hints) if len(g) < len(items) else leaf_order(g)
    return out
