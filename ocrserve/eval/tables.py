"""Tables found in candidate Markdown (pipe tables and HTML ``<table>``), as cell graphs.

olmOCR-Bench table tests ask "is there a cell like X whose neighbour up/down/left/right, or whose
top/left heading, is like Y". This module turns every table into a ``CellGraph``: cell texts keyed
by (row, first column), and for each cell the set of neighbouring cells in each direction
(several when spans are involved). Semantics follow olmOCR-Bench's table parsing (Apache-2.0):

- Markdown: a run of consecutive lines that contain ``|`` (at least two lines) is a table; the
  first all-dash/colon line is the separator and is dropped, as are lines made only of ``-:|`` and
  spaces; the first row and the first column are headings.
- HTML: every ``<table>``; rows are its ``<tr>`` elements, cells their direct ``<th>``/``<td>``
  children; ``<br>`` becomes a newline; ``th`` cells and cells inside ``<thead>`` are headings;
  rowspan/colspan are honoured (``rowspan="0"`` spans to the end of the table; bad values count
  as 1). A cell that overlaps a running rowspan wins and ends that rowspan.
- A heading walk goes up (or left) from a cell until the edge; it returns the heading cells met,
  or, if none, the cells at the edge.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

CellId = tuple[int, int]


@dataclass(frozen=True)
class CellSpec:
    text: str
    rowspan: int = 1
    colspan: int = 1
    heading: bool = False


@dataclass
class CellGraph:
    cells: dict[CellId, str]
    headings: set[CellId]
    up: dict[CellId, set[CellId]] = field(default_factory=dict)
    down: dict[CellId, set[CellId]] = field(default_factory=dict)
    left: dict[CellId, set[CellId]] = field(default_factory=dict)
    right: dict[CellId, set[CellId]] = field(default_factory=dict)
    rectangular: bool = True

    def _heading_walk(self, start: CellId, step: dict[CellId, set[CellId]]) -> set[CellId]:
        found: set[CellId] = set()
        edge: set[CellId] = set()
        seen: set[CellId] = set()
        todo = {start}
        while todo:
            cur = todo.pop()
            seen.add(cur)
            if cur in self.headings:
                found.add(cur)
            nxt = step.get(cur)
            if nxt:
                todo |= nxt
            else:
                edge.add(cur)
        found.discard(start)
        edge.discard(start)
        return found or edge

    def top_headings(self, cell: CellId) -> set[CellId]:
        return self._heading_walk(cell, self.up)

    def left_headings(self, cell: CellId) -> set[CellId]:
        return self._heading_walk(cell, self.left)


def _span(value: str | None) -> int:
    """A rowspan / colspan attribute's value (None: the attribute is absent or empty)."""
    if not value:
        return 1
    try:
        n = int(value)
    except (TypeError, ValueError):
        return 1
    return n if n > 0 else 1


def build_graph(rows: list[list[CellSpec]]) -> CellGraph | None:
    """Lay the cells out on a grid (honouring spans) and link neighbours."""
    if not rows:
        return None
    cells: dict[CellId, str] = {}
    headings: set[CellId] = set()
    extent: dict[CellId, tuple[int, int]] = {}  # cell -> (rowspan, colspan) as declared
    grid: list[list[CellId | None]] = []
    running: list[tuple[CellId, int] | None] = []  # per column: cell spanning down, rows left

    def take_running(col: int, line: list[CellId | None]) -> None:
        entry = running[col]
        if entry is None:
            line.append(None)
            return
        cid, left = entry
        line.append(cid)
        running[col] = (cid, left - 1) if left > 1 else None

    for r, specs in enumerate(rows):
        line: list[CellId | None] = []
        col = 0
        k = 0
        while k < len(specs) or col < len(running):
            if col < len(running) and running[col] is not None:
                take_running(col, line)
                col += 1
                continue
            if k >= len(specs):
                line.append(None)
                col += 1
                continue
            spec = specs[k]
            k += 1
            rs, cs = max(1, spec.rowspan), max(1, spec.colspan)
            cid = (r, col)
            cells[cid] = spec.text
            if spec.heading:
                headings.add(cid)
            extent[cid] = (rs, cs)
            if len(running) < col + cs:
                running.extend([None] * (col + cs - len(running)))
            for c in range(col, col + cs):
                line.append(cid)
                running[c] = (cid, rs - 1) if rs > 1 else None
            col += cs
        grid.append(line)
    while any(e is not None for e in running):
        line = []
        for c in range(len(running)):
            take_running(c, line)
        grid.append(line)

    if not cells:
        return None
    used_cols = [c for line in grid for c, v in enumerate(line) if v is not None]
    if not used_cols:
        return None
    width = max(used_cols) + 1
    grid = [(line + [None] * width)[:width] for line in grid]
    height = len(grid)

    def at(r: int, c: int) -> CellId | None:
        return grid[r][c] if 0 <= r < height and 0 <= c < width else None

    rel: dict[str, dict[CellId, set[CellId]]] = {d: defaultdict(set) for d in ("up", "down", "left", "right")}
    for cid, (rs, cs) in extent.items():
        r0, c0 = cid
        r1, c1 = r0 + rs - 1, c0 + cs - 1
        scans = {
            "right": [[(r, c) for c in range(c1 + 1, width)] for r in range(r0, r1 + 1)],
            "left": [[(r, c) for c in range(c0 - 1, -1, -1)] for r in range(r0, r1 + 1)],
            "down": [[(r, c) for r in range(r1 + 1, height)] for c in range(c0, c1 + 1)],
            "up": [[(r, c) for r in range(r0 - 1, -1, -1)] for c in range(c0, c1 + 1)],
        }
        for direction, rays in scans.items():
            for ray in rays:
                for r, c in ray:
                    other = at(r, c)
                    if other is None or other == cid:
                        continue
                    rel[direction][cid].add(other)
                    break

    return CellGraph(
        cells=cells,
        headings=headings,
        up={c: set(rel["up"][c]) for c in cells},
        down={c: set(rel["down"][c]) for c in cells},
        left={c: set(rel["left"][c]) for c in cells},
        right={c: set(rel["right"][c]) for c in cells},
        rectangular=all(v is not None for line in grid for v in line),
    )


def _is_separator(line: str) -> bool:
    body = line.replace("|", "").strip()
    return bool(body) and all(ch in "- :" for ch in body)


def _markdown_rows(lines: list[str]) -> list[list[str]]:
    sep = next((i for i, line in enumerate(lines) if _is_separator(line)), None)
    rows: list[list[str]] = []
    for i, line in enumerate(lines):
        if i == sep:
            continue
        if line.strip() and all(ch in "- :|" for ch in line):
            continue
        cells = [c.strip() for c in line.split("|")]
        if cells and cells[0] == "":
            cells = cells[1:]
        if cells and cells[-1] == "":
            cells = cells[:-1]
        if cells:
            rows.append(cells)
    return rows


def parse_markdown_tables(text: str) -> list[CellGraph]:
    """Every pipe table in ``text`` (first row and first column are headings)."""
    blocks: list[list[str]] = []
    current: list[str] | None = None
    for line in text.strip().split("\n"):
        if "|" in line:
            if current is None:
                current = []
                blocks.append(current)
            current.append(line)
        else:
            current = None
    graphs = []
    for block in blocks:
        if len(block) < 2:
            continue
        rows = _markdown_rows(block)
        if not rows:
            continue
        specs = [[CellSpec(t, heading=(r == 0 or c == 0)) for c, t in enumerate(row)] for r, row in enumerate(rows)]
        graph = build_graph(specs)
        if graph is not None:
            graphs.append(graph)
    return graphs


def parse_html_tables(text: str) -> list[CellGraph]:
    """Every HTML ``<table>`` in ``text``."""
    if "<table" not in text.lower():
        return []
    from selectolax.lexbor import LexborHTMLParser

    tree = LexborHTMLParser(text)
    graphs = []
    for table in tree.css("table"):
        trs = table.css("tr")
        if not trs:
            continue
        rows: list[list[CellSpec]] = []
        for r, tr in enumerate(trs):
            in_thead = False
            parent = tr.parent
            while parent is not None:
                if parent.tag == "thead":
                    in_thead = True
                    break
                parent = parent.parent
            specs = []
            for cell in tr.iter():
                if cell.tag not in ("td", "th"):
                    continue
                for br in cell.css("br"):
                    br.replace_with("\n")
                raw_rs = cell.attributes.get("rowspan")
                rs = _span(raw_rs)
                if isinstance(raw_rs, str) and raw_rs.strip() == "0":
                    rs = max(1, len(trs) - r)
                specs.append(
                    CellSpec(
                        text=(cell.text(deep=True, separator="") or "").strip(),
                        rowspan=rs,
                        colspan=_span(cell.attributes.get("colspan")),
                        heading=cell.tag == "th" or in_thead,
                    )
                )
            rows.append(specs)
        graph = build_graph(rows)
        if graph is not None:
            graphs.append(graph)
    return graphs
