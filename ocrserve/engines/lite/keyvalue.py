"""Key/value rows of narrow documents (receipts, till slips, price lists): a name on the left and its value
right-aligned on the right, a wide gap (or a dotted leader) between.

Read by boxes, such a page splits in two: the XY-cut finds the wide empty gap between the names and the
prices and reads all the names, then all the prices; the table search (ocrserve.engines.lite.tables) wants
cells shorter than a third of the page, which a receipt's item names are not. So before both, the rows of
a narrow page (a few dozen characters wide) are grouped by vertical overlap across the gap, and a run of
three or more rows whose right part is one number, right-aligned in a column, becomes a two-column table:
one row a name and its price, in order.
"""

from __future__ import annotations

import re
from statistics import median

from ocrserve.engines.lite.tables import Cell, TableItem
from ocrserve.ingest.pdf.textlayer import Line

NARROW_CHARS = 64  # a page at most this many characters wide (of its median character width) is narrow
_LEADER = re.compile(r"^[\s.\u00b7\u2026_\-\u2013\u2014:*]*$")  # dots, dashes, underscores only
_LEADER_END = re.compile(r"[\s.\u00b7\u2026_]{3,}$|\s*[\u2026]+$")
_LEADER_START = re.compile(r"^[\s.\u00b7\u2026_]{2,}")
_VALUE = re.compile(
    r"^[\s$\u20ac\u00a3\u00a5(+\-\u2013\u2212]*(?:[A-Z]{3}\s*)?\d[\d.,\s]*\s*[%)]?\s*[A-Z*]?$"
)  # 2.15, $1,299.00, -0.50, 20%, 23.32 A, EUR 4.10


def narrow(lines: list[Line], width: float) -> bool:
    """The page is a few dozen characters wide (a receipt strip), measured in its own median character."""
    cws = [l.w / len(l.text) for l in lines if len(l.text.strip()) >= 3 and not l.angle]
    return len(cws) >= 3 and width <= NARROW_CHARS * median(cws)


def _rows(lines: list[Line]) -> list[list[Line]]:
    """Lines grouped into rows by vertical overlap (at least half the lower box), left to right."""
    rows: list[list[Line]] = []
    band = (0.0, 0.0)
    for l in sorted(lines, key=lambda l: l.cy):
        if rows:
            ov = min(band[1], l.y1) - max(band[0], l.y0)
            if ov >= 0.5 * min(band[1] - band[0], l.h):
                rows[-1].append(l)
                continue
        rows.append([l])
        band = (l.y0, l.y1)
    return [sorted(r, key=lambda l: l.x0) for r in rows]


def _value_text(text: str) -> str | None:
    t = _LEADER_START.sub("", text).strip()
    return t if t and _VALUE.match(t) else None


def _pair(row: list[Line], gap: float) -> tuple[str, str, Line] | None:
    """(key, value, value's line) when the row is a key, a wide gap (or a dotted leader) and one value."""
    leader = any(_LEADER.match(l.text) for l in row)
    row = [l for l in row if not _LEADER.match(l.text) and not l.angle]
    if len(row) < 2:
        return None
    value = row[-1]
    text = _value_text(value.text)
    keys = row[:-1]
    raw = " ".join(k.text.strip() for k in keys)
    leader = leader or bool(_LEADER_END.search(raw)) or value.text.strip() != text
    if text is None or value.x0 - max(k.x1 for k in keys) < (0 if leader else gap):
        return None
    for a, b in zip(keys, keys[1:]):
        if b.x0 - a.x1 >= gap:
            return None  # three parts with wide gaps: a table's row, not a key and its value
    key = _LEADER_END.sub("", raw).strip()
    if not key or not any(ch.isalpha() for ch in key):
        return None
    return key, text, value


def _head(row: list[Line], first: list[Line], values: list[Line], left: float, lh: float) -> tuple[str, str] | None:
    """The row right above a run, two short labels over its two columns ("Item", "Price"): its header."""
    row = [l for l in row if not _LEADER.match(l.text)]
    if len(row) != 2 or min(l.y0 for l in first) - max(l.y1 for l in row) > 1.5 * lh:
        return None
    a, b = row
    over = b.x1 > min(v.x0 for v in values) and b.x0 < max(v.x1 for v in values)
    if b.x0 - a.x1 < 1.5 * lh or abs(a.x0 - left) > 2 * lh or not over or _value_text(b.text) is not None:
        return None
    if len(a.text) > 30 or len(b.text) > 20 or not any(ch.isalpha() for ch in a.text + b.text):
        return None
    return a.text.strip(), b.text.strip()


def key_value_tables(lines: list[Line], width: float) -> tuple[list[TableItem], list[Line]]:
    """Runs of key/value rows on a narrow page -> (two-column tables, the other lines)."""
    if len(lines) < 6 or not narrow(lines, width):
        return [], lines
    lh = median(l.h for l in lines)
    rows = _rows(lines)
    pairs = [_pair(r, 1.5 * lh) for r in rows]
    tables: list[TableItem] = []
    used: set[int] = set()
    i = 0
    while i < len(rows):
        j = i
        while j < len(rows) and pairs[j] is not None:
            if j > i and min(l.y0 for l in rows[j]) - max(l.y1 for l in rows[j - 1]) > 2.5 * lh:
                break
            j += 1
        run = list(range(i, j))
        i = max(j, i + 1)
        if len(run) < 3:
            continue
        values = [p[2] for k in run if (p := pairs[k]) is not None]
        right = median(v.x1 for v in values)
        if any(abs(v.x1 - right) > 1.2 * lh for v in values):
            continue  # the values are not one right-aligned column
        left = min(l.x0 for k in run for l in rows[k])
        if sum(1 for k in run if rows[k][0].x0 <= left + 2 * lh) < 0.75 * len(run):
            continue  # the keys do not start at one left edge
        cells = [[Cell(p[0], 0), Cell(p[1], 1)] for k in run if (p := pairs[k]) is not None]
        head = _head(rows[run[0] - 1], rows[run[0]], values, left, lh) if run[0] > 0 else None
        if head is not None and not any(id(l) in used for l in rows[run[0] - 1]):
            cells.insert(0, [Cell(head[0], 0), Cell(head[1], 1)])
            run.insert(0, run[0] - 1)
        mine = [l for k in run for l in rows[k]]
        used.update(id(l) for l in mine)
        tables.append(
            TableItem(
                rows=cells,
                header_rows=1 if head is not None else 0,
                x0=min(l.x0 for l in mine),
                y0=min(l.y0 for l in mine),
                x1=max(l.x1 for l in mine),
                y1=max(l.y1 for l in mine),
                lines=mine,
                columns=2,
            )
        )
    return tables, [l for l in lines if id(l) not in used]
