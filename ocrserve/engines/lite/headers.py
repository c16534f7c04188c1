"""Running headers and footers of a page: lines at the top / bottom, set apart from the body.

A line is a header (footer) when
- it sits in the top (bottom) band of the page, is not larger than body text, and a gap separates
  it from the body;
- or it is a page number ("12", "Page 3 of 9", "- 4 -", "xii") that is the first (last) line of
  the page, apart from the body, wherever the page's text ends (a page scaled onto a larger sheet);
- or it belongs to a first (last) row of two or more short pieces spread across the page in the
  top (bottom) band ("Revision 2.4 ... P/N 119-036 ... 10 June 2019", "400  BRITISH HUSBANDRY  [Ch. XIX.");
- or the document's other pages repeat it in the same band (`running`, normalised texts from
  ocrserve.engines.lite.running).
"""

from __future__ import annotations

import re
from collections.abc import Collection

from ocrserve.ingest.pdf.chars import rows_of
from ocrserve.ingest.pdf.textlayer import Line

PAGE_NUMBER = re.compile(
    r"^\s*(page\s*)?[-\u2013\u2014]?\s*(\d{1,4}|[ivxlc]{1,7})\s*[-\u2013\u2014]?\s*((of|/)\s*\d{1,4})?\s*$",
    re.IGNORECASE,
)


def metric(line: Line) -> float:
    return line.size if line.size > 0 else line.h


def normalise(text: str) -> str:
    """The form running lines are compared in: lower case, digits as #, no spaces or punctuation."""
    return re.sub(r"\d+", "#", re.sub(r"[\W_]+", "", text.lower()))


def _rows(lines: list[Line]) -> list[list[Line]]:
    return rows_of(lines, 0.4)


def _spread(row: list[Line], width: float) -> bool:
    """Two or more short pieces far apart across the page (left / centre / right slots)."""
    if len(row) < 2 or any(len(l.text) > 60 for l in row):
        return False
    row = sorted(row, key=lambda l: l.x0)
    gaps = [b.x0 - a.x1 for a, b in zip(row, row[1:])]
    return min(gaps) >= 0.08 * width and row[-1].x1 - row[0].x0 >= 0.45 * width


def _grid_cells(rows: list[list[Line]]) -> set[int]:
    """Lines of rows of three or more pieces next to another such row: a table's cells ("Item 41" on
    each page of a long table repeats, but is no running header)."""
    out: set[int] = set()
    for k, row in enumerate(rows):
        near = [rows[j] for j in (k - 1, k + 1) if 0 <= j < len(rows)]
        h = max(l.h for l in row)
        if len(row) >= 3 and any(len(r) >= 3 and abs(r[0].cy - row[0].cy) <= 3 * h for r in near):
            out.update(id(l) for l in row)
    return out


def _edge_zone(lines: list[Line], height: float, small, *, bottom: bool) -> list[Line]:
    """The lines past the last (first) full-width blank strip of >= 2 line heights near the bottom
    (top) edge, when they are few, short and not larger than body text."""
    if len(lines) < 4:
        return []
    hs = sorted(l.h for l in lines)
    lh = hs[len(hs) // 2]
    blocks: list[list[Line]] = []
    end = 0.0  # the bottom of the last block (read once there is one)
    for l in sorted(lines, key=lambda l: l.y0):
        if blocks and l.y0 < end + 0.01:
            blocks[-1].append(l)
            end = max(end, l.y1)
        else:
            blocks.append([l])
            end = l.y1
    if bottom:
        blocks.reverse()
    best: list[Line] = []
    for k in range(1, min(len(blocks), 4)):
        zone = [l for b in blocks[:k] for l in b]
        inner = blocks[k]
        gap = (
            (min(l.y0 for l in zone) - max(l.y1 for l in inner))
            if bottom
            else (min(l.y0 for l in inner) - max(l.y1 for l in zone))
        )
        edge_ok = min(l.y0 for l in zone) >= 0.85 * height if bottom else max(l.y1 for l in zone) <= 0.15 * height
        if not edge_ok:
            break
        if gap >= 2 * lh and all(small(l) and len(l.text) <= 80 for l in zone) and len(zone) <= 6:
            best = zone
    return best


def split_headers_footers(
    lines: list[Line], height: float, body_metric: float, running: Collection[str] = (), width: float = 0.0
) -> tuple[list[Line], list[Line], list[Line]]:
    """(headers, body, footers)."""
    if len(lines) < 4:
        return [], lines, []
    width = width or max(l.x1 for l in lines)
    rep = set(running)

    def small(l: Line) -> bool:
        return metric(l) <= 1.3 * body_metric

    top: dict[int, Line] = {id(l): l for l in lines if l.y1 <= 0.08 * height and small(l)}
    bottom: dict[int, Line] = {id(l): l for l in lines if l.y0 >= 0.92 * height and small(l)}
    bottom.update({id(l): l for l in lines if l.y0 >= 0.85 * height and PAGE_NUMBER.match(l.text)})
    top.update({id(l): l for l in lines if l.y1 <= 0.12 * height and PAGE_NUMBER.match(l.text)})
    sure: set[int] = set()  # no gap needed
    rows = [r for r in _rows(lines) if any(ch.isalnum() for l in r for ch in l.text)]

    def running_row(row: list[Line], nxt: list[Line] | None) -> bool:
        """Left / centre / right pieces (a running head may be set larger), not a table's first row."""
        if not _spread(row, width) or any(metric(l) > 1.6 * body_metric for l in row):
            return False
        if (
            nxt is not None
            and len(nxt) >= 2
            and all(l.w < 0.35 * width for l in nxt)
            and sum(1 for l in nxt if any(abs(l.x0 - r.x0) < 2 * r.h or abs(l.x1 - r.x1) < 2 * r.h for r in row)) >= 2
        ):
            return False
        return True

    if len(rows) >= 3 and rows[0][0].y1 <= 0.15 * height and running_row(rows[0], rows[1]):
        top.update({id(l): l for l in rows[0]})
        sure.update(id(l) for l in rows[0])
    if len(rows) >= 3 and rows[-1][0].y0 >= 0.85 * height and running_row(rows[-1], rows[-2]):
        bottom.update({id(l): l for l in rows[-1]})
        sure.update(id(l) for l in rows[-1])
    # a lone page number first / last on the page, wherever the text ends
    if len(rows) >= 3:
        for row, side, nxt in ((rows[0], top, rows[1]), (rows[-1], bottom, rows[-2])):
            if len(row) == 1 and PAGE_NUMBER.match(row[0].text) and small(row[0]):
                gap = row[0].y0 - max(l.y1 for l in nxt) if side is bottom else min(l.y0 for l in nxt) - row[0].y1
                if gap >= 1.5 * row[0].h:
                    side[id(row[0])] = row[0]
    if rep:
        cells = _grid_cells(rows)
        rep_ids = {id(l) for l in lines if normalise(l.text) in rep and id(l) not in cells}
        for l in lines:
            if len(l.text) <= 120 and id(l) in rep_ids and small(l):
                if l.y1 <= 0.2 * height:
                    top[id(l)] = l
                elif l.y0 >= 0.8 * height:
                    bottom[id(l)] = l
    rest = [l for l in lines if id(l) not in top and id(l) not in bottom]
    # wider bands: short lines beyond a full-width blank strip of two line heights or more
    for zone, side in (
        (_edge_zone(rest, height, small, bottom=False), top),
        (_edge_zone(rest, height, small, bottom=True), bottom),
    ):
        side.update({id(l): l for l in zone})
    rest = [l for l in lines if id(l) not in top and id(l) not in bottom]
    if not rest:
        return [], lines, []
    body_top = min(l.y0 for l in rest)
    body_bottom = max(l.y1 for l in rest)
    rep_ids = rep_ids if rep else set()
    headers = [l for l in top.values() if l.y1 + 0.5 * l.h <= body_top or id(l) in sure or id(l) in rep_ids]
    footers = [l for l in bottom.values() if l.y0 - 0.5 * l.h >= body_bottom or id(l) in sure or id(l) in rep_ids]
    edge = {id(l) for l in headers} | {id(l) for l in footers}
    body = [l for l in lines if id(l) not in edge]
    return headers, body, footers
