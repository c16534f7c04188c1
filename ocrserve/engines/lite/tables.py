"""Tables from line fragments: where they are, their columns, rows, header rows and spans.

Works on the fragments of one page (text-layer words and phrases, or OCR lines), every threshold
relative to the typical line height `lh`:

1. region: a run of rows of two or more short cells; rows of one short cell between two such
   rows stay in the run (a cell's second line, a group label), as does one leading header row;
2. columns (table_columns.py): x ranges that fragments of the run cover, split by gutters that
   (almost) no fragment crosses; a fragment over a gutter is a spanning cell, not a reason to merge columns;
3. rows: fragments of one band; a fragment alone in its column just under (or over) a cell of the
   same column, with a line gap, is that cell's next line (multi-line cells are joined);
4. header rows: the leading rows that are bold, or have no numbers while the body does, plus a row
   of rotated column heads (slanted or vertical text right over the columns);
5. spans: a cell of a header row above the last one spans the columns it is centred over.
"""

from __future__ import annotations

import html
import math
import re
from dataclasses import dataclass, field

from ocrserve.engines.lite.table_columns import gutters, join_word_columns, span
from ocrserve.ingest.pdf.chars import rows_of
from ocrserve.ingest.pdf.textlayer import Line

_YEAR = re.compile(r"^\s*(19|20)\d\d\s*$")
_NUMERIC = re.compile(r"^[\s$\u20ac\u00a3\u00a5(+\-\u2013\u2212]*[\d.,]+\s*[%)TBMKkx\u00d7]*\s*$")


@dataclass
class Cell:
    text: str
    col: int
    span: int = 1


@dataclass
class TableItem:
    rows: list[list[Cell]]
    header_rows: int
    x0: float
    y0: float
    x1: float
    y1: float
    lines: list[Line] = field(default_factory=list)
    columns: int = 0

    def grid(self) -> list[list[str]]:
        """Texts on the column grid (a spanning cell in its first column)."""
        out = []
        for r in self.rows:
            row = [""] * self.columns
            for c in r:
                row[c.col] = c.text
            out.append(row)
        return out


def _rows(lines: list[Line]) -> list[list[Line]]:
    rows: list[list[Line]] = []
    bands: list[tuple[float, float]] = []
    for ln in sorted(lines, key=lambda l: l.cy):
        if rows:
            y0, y1 = bands[-1]
            ov = min(y1, ln.y1) - max(y0, ln.y0)
            if ov >= 0.4 * min(y1 - y0, ln.h):
                rows[-1].append(ln)
                bands[-1] = (min(y0, ln.y0), max(y1, ln.y1)) if len(rows[-1]) <= 2 else bands[-1]
                continue
        rows.append([ln])
        bands.append((ln.y0, ln.y1))
    return [sorted(r, key=lambda l: l.x0) for r in rows]


def _is_num(text: str) -> bool:
    return bool(_NUMERIC.match(text))


def detect_tables(
    lines: list[Line], width: float, lh: float, rotated: list[Line] | None = None, word_gap: float = 0.0
) -> tuple[list[TableItem], list[Line], list[Line]]:
    """Tables among a page's upright lines -> (tables, lines not in a table, rotated lines not used).
    `word_gap`: neighbouring columns never further apart than this (in line heights) are words of one
    (OCR's word pieces, ocrserve.engines.lite.grid); 0: none."""
    rows = _rows(lines)
    rotated = list(rotated or [])

    def short(l: Line) -> bool:
        return l.w < 0.33 * width and len(l.text) <= 48

    def tabular(row: list[Line]) -> bool:
        return sum(1 for l in row if short(l)) >= 2 and all(l.w < 0.5 * width for l in row)

    def near(a: list[Line], b: list[Line], k: float = 2.0) -> bool:
        """Row b follows row a closely, or rotated column heads fill the space between them."""
        top, bottom = max(l.y1 for l in a), min(l.y0 for l in b)
        if bottom - top <= k * lh:
            return True
        x0, x1 = min(l.x0 for l in a + b), max(l.x1 for l in a + b)
        filled = [r for r in rotated if r.y0 < bottom and r.y1 > top and r.x1 > x0 and r.x0 < x1]
        return (
            len(filled) >= 2
            and bottom - max(r.y1 for r in filled) <= k * lh
            and min(r.y0 for r in filled) - top <= k * lh
        )

    tables: list[TableItem] = []
    used: set[int] = set()
    i = 0
    while i < len(rows):
        if not tabular(rows[i]):
            i += 1
            continue
        j = i
        run: list[list[Line]] = []
        while j < len(rows):
            row = rows[j]
            if run and not near(run[-1], row):
                break
            if tabular(row):
                run.append(row)
                j += 1
                continue
            # up to two rows of one short cell between tabular rows stay in the table
            k = j
            while k < len(rows) and k - j < 2 and not tabular(rows[k]) and all(short(l) for l in rows[k]):
                k += 1
            if k > j and k < len(rows) and tabular(rows[k]) and near(rows[k - 1], rows[k]):
                run.extend(rows[j:k])
                j = k
                continue
            break
        n_tab = sum(1 for r in run if tabular(r))
        if n_tab >= 3 or (n_tab >= 2 and min(len(r) for r in run if tabular(r)) >= 3):
            # a header row of short cells right above (fewer cells than the body rows)
            sizes = sorted(l.size or l.h for r in run for l in r)
            if (
                i > 0
                and all(short(l) and (l.size or l.h) <= 1.15 * sizes[len(sizes) // 2] for l in rows[i - 1])
                and near(rows[i - 1], run[0], 1.5)
                and not _title_like(rows[i - 1], run)
                and min(l.x0 for l in rows[i - 1]) >= min(l.x0 for r in run for l in r) - lh
                and max(l.x1 for l in rows[i - 1]) <= max(l.x1 for r in run for l in r) + lh
                and not any(id(l) in used for l in rows[i - 1])
            ):
                run.insert(0, rows[i - 1])
            table = make_table(run, lh, rotated, word_gap)
            if table is not None:
                tables.append(table)
                used.update(id(c) for r in run for c in r)
                i = j
                continue
        i = max(j, i + 1)
    rest = [l for l in lines if id(l) not in used]
    taken = {id(l) for t in tables for l in t.lines}
    return tables, rest, [l for l in rotated if id(l) not in taken]


def _title_like(row: list[Line], run: list[list[Line]]) -> bool:
    """A lone line above a table that starts at its left edge or is centred on it: its title."""
    if len(row) != 1:
        return False
    x0, x1 = min(l.x0 for r in run for l in r), max(l.x1 for r in run for l in r)
    l = row[0]
    return l.x0 <= x0 + 0.25 * (x1 - x0) or abs(l.cx - (x0 + x1) / 2) <= 0.1 * (x1 - x0)


def _continues(a: Line, b: Line, lh: float) -> bool:
    """Line b (below) is the next line of cell line a: a line gap, and tighter than the rows are
    apart unless b is set smaller or indented (a note under the cell's name)."""
    gap = b.y0 - a.y1
    if gap < -0.3 * lh or abs(b.x0 - a.x0) > 3 * lh or b.size > a.size * 1.05:
        return False
    if gap <= 0.45 * lh:
        return True
    return gap <= 0.8 * lh and (b.size < 0.9 * a.size or b.x0 > a.x0 + 0.5 * lh)


def make_table(run: list[list[Line]], lh: float, rotated: list[Line], word_gap: float = 0.0) -> TableItem | None:
    cells = [c for r in run for c in r]
    hs = sorted(c.h for c in cells)
    lh = hs[len(hs) // 2]
    cols = gutters(cells, len(run), lh)
    if word_gap:
        cols = join_word_columns(cols, run, word_gap * lh)
    if len(cols) < 2:
        return None
    lengths = sorted(len(c.text) for c in cells)
    if lengths[len(lengths) // 2] > 30:
        return None  # three-column running text is not a table: its cells are long
    prose = sum(1 for c in cells if len(c.text.split()) >= 4 and c.text[:1].islower())
    if prose >= 0.3 * len(cells):
        return None  # columns of running text: most lines go on a sentence of the line above
    # rows: bands of fragments; a lone fragment right under a cell of its column continues it
    grid: list[dict[int, list[Line]]] = []
    spans: list[dict[int, int]] = []
    bands: list[tuple[float, float]] = []
    for row in run:
        placed: dict[int, list[Line]] = {}
        rspan: dict[int, int] = {}
        for l in row:
            ks = span(l, cols)
            placed.setdefault(ks[0], []).append(l)
            rspan[ks[0]] = max(rspan.get(ks[0], 1), len(ks))
        if grid and len(placed) == 1 and len(row) == 1:
            ((k, [l]),) = placed.items()
            above = grid[-1].get(k)
            if (
                above is not None
                and rspan[k] == 1
                and spans[-1].get(k, 1) == 1
                and _continues(max(above, key=lambda a: a.y1), l, lh)
            ):
                above.append(l)
                continue
        grid.append(placed)
        spans.append(rspan)
        bands.append((min(l.y0 for l in row), max(l.y1 for l in row)))
    # a lone first line of a cell that sits above its row (cells centred on a multi-line cell)
    merged_grid: list[dict[int, list[Line]]] = []
    merged_spans: list[dict[int, int]] = []
    for placed, rspan in zip(grid, spans):
        if merged_grid and len(merged_grid[-1]) == 1 and len(placed) >= 2:
            ((k, prev),) = merged_grid[-1].items()
            mine = placed.get(k) or []
            others = [l for kk, ls in placed.items() if kk != k for l in ls]
            centred = bool(others and mine) and sorted(l.y0 for l in others)[len(others) // 2] < mine[0].y0 - 0.2 * lh
            if (
                mine
                and centred
                and merged_spans[-1].get(k, 1) == 1
                and not _is_num(prev[0].text)
                and _continues(prev[-1], mine[0], lh)
            ):
                placed[k] = prev + mine
                merged_grid[-1] = placed
                merged_spans[-1] = rspan
                continue
        merged_grid.append(placed)
        merged_spans.append(rspan)
    grid, spans = merged_grid, merged_spans
    filled = sum(1 for g in grid if len(g) >= 2)
    if filled < 0.5 * len(grid) or filled < 2:
        return None
    per_col = [sum(1 for g in grid if k in g) for k in range(len(cols))]
    if sum(1 for n in per_col if n >= 2) < 2:
        return None  # pieces side by side once (formulas of two columns), not a grid
    rows: list[list[Cell]] = []
    for placed, rspan in zip(grid, spans):
        rows.append([Cell(_cell_text(placed[k]), k, rspan[k]) for k in sorted(placed)])
    header = _header_rows(grid)
    table_lines = list(cells)
    x0, y0 = min(c.x0 for c in cells), min(c.y0 for c in cells)
    x1, y1 = max(c.x1 for c in cells), max(c.y1 for c in cells)
    heads = _rotated_heads(rotated, cols, x0, x1, y0, lh, header)
    if heads:
        hrow = [Cell(" ".join(l.text for l in ls), k) for k, ls in sorted(heads.items())]
        # rotated heads name the body columns: they go right above the body
        rows.insert(header, hrow)
        grid.insert(header, dict(heads.items()))
        header += 1
        y0 = min(y0, min(l.y0 for ls in heads.values() for l in ls))
        table_lines += [l for ls in heads.values() for l in ls]
    _header_spans(rows, header, cols)
    return TableItem(rows=rows, header_rows=header, x0=x0, y0=y0, x1=x1, y1=y1, lines=table_lines, columns=len(cols))


def _cell_text(lines: list[Line]) -> str:
    """A cell's lines top to bottom, pieces of one line left to right."""
    return " ".join(l.text for row in rows_of(lines, 0.5) for l in sorted(row, key=lambda l: l.x0))


def _header_rows(grid: list[dict[int, list[Line]]]) -> int:
    """Leading rows that are bold, or without numbers while the body has numbers (at most 4)."""

    def numeric(g: dict[int, list[Line]]) -> bool:
        return any(_is_num(l.text) for ls in g.values() for l in ls)

    def bold(g: dict[int, list[Line]]) -> bool:
        return all(l.bold for ls in g.values() for l in ls)

    body_bold = sum(1 for g in grid if bold(g)) > 0.5 * len(grid)
    n = 0
    while n < min(4, len(grid) - 1) and not body_bold and bold(grid[n]):
        n += 1

    def labels(g: dict[int, list[Line]]) -> bool:  # no numbers but years (column heads "2019", "2020")
        return not any(_is_num(l.text) and not _YEAR.match(l.text) for ls in g.values() for l in ls)

    if n == 0 and sum(1 for g in grid if numeric(g)) >= 0.5 * len(grid):
        while n < min(3, len(grid) - 1) and not numeric(grid[n]):
            n += 1
        if n == 0 and labels(grid[0]) and not labels(grid[1]) and len(grid[0]) >= 2:
            n = 1
    return n


def _rotated_heads(
    rotated: list[Line], cols: list[tuple[float, float]], x0: float, x1: float, y0: float, lh: float, header: int
) -> dict[int, list[Line]]:
    """Rotated lines right over the table (its column heads), by the column where each one starts."""
    heads: dict[int, list[Line]] = {}
    if not rotated:
        return heads
    for l in rotated:
        if l.x1 < x0 - lh or l.x0 > x1 + lh:
            continue
        if l.y1 < y0 - 12 * lh or l.y0 > y0 + (header + 3) * 2 * lh:
            continue
        # where the text starts: slanted upwards text starts at its bottom left
        a = math.radians(l.angle)
        if abs(math.cos(a)) < 0.3:
            sx = l.cx
        elif math.cos(a) > 0:
            sx = l.x0 + 0.15 * min(l.w, l.h)
        else:
            sx = l.x1 - 0.15 * min(l.w, l.h)
        k = next((k for k, (a0, b0) in enumerate(cols) if a0 - 0.3 * lh <= sx <= b0 + 0.3 * lh), None)
        if k is None:
            continue
        heads.setdefault(k, []).append(l)
    return heads if len(heads) >= 2 else {}


def _header_spans(rows: list[list[Cell]], header: int, cols: list[tuple[float, float]]) -> None:
    """In header rows above the last one, a cell spans the columns it is centred over."""
    centres = [(a + b) / 2 for a, b in cols]
    for r in range(max(header - 1, 0)):
        row = rows[r]
        if len(row) >= len(cols):
            continue
        boxes = [(cols[c.col][0], cols[c.col + c.span - 1][1]) for c in row]
        for n, c in enumerate(row):
            lo, hi = _between(
                boxes[n], boxes[n - 1][1] if n > 0 else None, boxes[n + 1][0] if n + 1 < len(row) else None, cols
            )
            ks = [k for k, x in enumerate(centres) if lo < x < hi]
            if ks and ks[0] <= c.col:
                c.span = ks[-1] - ks[0] + 1
                c.col = ks[0]
        # spans must not overlap: clip on the next cell
        for n in range(len(row) - 1):
            if row[n].col + row[n].span > row[n + 1].col:
                row[n].span = max(1, row[n + 1].col - row[n].col)


def _between(
    box: tuple[float, float], left: float | None, right: float | None, cols: list[tuple[float, float]]
) -> tuple[float, float]:
    """The x range a header cell of `box` is centred in: between its neighbours' edges (`left`, `right`), a
    missing side mirrored from the other; alone in its row, over the columns on its side."""
    a, b = box
    if left is not None and right is not None:
        return left, right
    if left is not None:
        return left, b + (a - left)
    if right is not None:
        return a - (right - b), right
    d = max(min(cols[-1][1] - b, a - cols[0][0]), 0.0)
    return a - d - 0.5, b + d + 0.5


def table_html(t: TableItem) -> str:
    out = ["<table>"]
    for r, row in enumerate(t.rows):
        tag = "th" if r < t.header_rows else "td"
        col = 0
        parts = []
        for c in sorted(row, key=lambda c: c.col):
            if c.col < col:
                continue
            parts += [f"<{tag}></{tag}>"] * (c.col - col)
            span = f' colspan="{c.span}"' if c.span > 1 else ""
            parts.append(f"<{tag}{span}>{_esc(c.text)}</{tag}>")
            col = c.col + c.span
        parts += [f"<{tag}></{tag}>"] * (t.columns - col)
        out.append("<tr>" + "".join(parts) + "</tr>")
    out.append("</table>")
    return "".join(out)


def _esc(text: str) -> str:
    return html.escape(text, quote=False)
