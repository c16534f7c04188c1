"""Text inside figures: chart ticks, axis names, map labels.

A chart's labels are short pieces ("90", "DA2", "Station") scattered around an empty plotting area;
read as body text they land between paragraphs, some as headings ("# 90"). A cluster of short lines
(each within a few line heights of another) is a figure's text when it is sparse (its words cover
little of its box: a list or a table of short cells is dense) and mostly label-like (a few characters
each), and no running text lies inside its box. The cluster becomes one figure block whose
description holds its labels; a figure already found there (an image region) takes them.
"""

from __future__ import annotations

from dataclasses import dataclass

from ocrserve.ingest.pdf.textlayer import Line

Box = tuple[float, float, float, float]


@dataclass
class FigureItem:
    x0: float
    y0: float
    x1: float
    y1: float
    text: str = ""  # the labels inside the figure, in reading order


def _short(l: Line) -> bool:
    return len(l.text) <= 15 and len(l.text.split()) <= 3


def _clusters(lines: list[Line], reach: float) -> list[list[Line]]:
    """Single-linkage clusters: two lines belong together when their boxes are within `reach`."""
    n = len(lines)
    parent = list(range(n))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for i in range(n):
        a = lines[i]
        for j in range(i + 1, n):
            b = lines[j]
            dx = max(a.x0 - b.x1, b.x0 - a.x1, 0.0)
            dy = max(a.y0 - b.y1, b.y0 - a.y1, 0.0)
            if dx <= reach and dy <= reach:
                parent[find(i)] = find(j)
    groups: dict[int, list[Line]] = {}
    for i in range(n):
        groups.setdefault(find(i), []).append(lines[i])
    return list(groups.values())


def figure_text(lines: list[Line], lh: float, figures: list[FigureItem]) -> tuple[list[FigureItem], list[Line]]:
    """(figures, with the labels found in them or around them, and the lines left to the body)."""
    short = [l for l in lines if _short(l) and not l.angle]
    long_ = [l for l in lines if not _short(l)]
    taken: set[int] = set()
    out = list(figures)
    for group in _clusters(short, 6.0 * lh):
        box = (min(l.x0 for l in group), min(l.y0 for l in group), max(l.x1 for l in group), max(l.y1 for l in group))
        area = (box[2] - box[0]) * (box[3] - box[1])
        ink = sum(l.w * l.h for l in group)
        labels = sum(1 for l in group if len(l.text.strip()) <= 6)
        inside = [
            l
            for l in long_
            if l.x0 < box[2] and l.x1 > box[0] and l.y0 < box[3] - 0.3 * l.h and l.y1 > box[1] + 0.3 * l.h
        ]
        if len(group) < 6 or area <= 0 or ink > 0.12 * area or labels < 0.5 * len(group) or inside:
            continue
        rows = len({round(l.cy / lh) for l in group})
        cols = len({round(l.cx / lh) for l in group})
        if rows < 2 or cols < 2:
            continue  # one row or one column of short pieces: a list or a line of a table, not a chart
        order = sorted(group, key=lambda l: (round(l.cy / lh), l.x0))
        text = " ".join(l.text.strip() for l in order)
        host = next((f for f in out if f.x0 <= box[2] and f.x1 >= box[0] and f.y0 <= box[3] and f.y1 >= box[1]), None)
        if host is None:
            out.append(FigureItem(*box, text=text))
        else:
            host.x0, host.y0 = min(host.x0, box[0]), min(host.y0, box[1])
            host.x1, host.y1 = max(host.x1, box[2]), max(host.y1, box[3])
            host.text = f"{host.text} {text}".strip()
        taken.update(id(l) for l in group)
    return out, [l for l in lines if id(l) not in taken]
