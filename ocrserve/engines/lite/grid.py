"""Tables in OCR'd images, found before the OCR boxes are joined into lines.

RapidOCR reads a table row as a few boxes whose padding nearly closes the gaps between narrow
columns, and sometimes as one box over several cells ("2021 Share", "61.2 48.7 50.9"). So for an OCR
page the table search (ocrserve.engines.lite.tables) runs first, on word pieces:

1. each OCR line is cut into pieces at its word gaps (RapidOCR's word boxes, tight to the ink);
   a piece keeps the words between gaps wider than a space of the line's height
   (`split_words`); the cuts do not matter for text outside a table, which keeps its whole lines;
2. the page is cut into regions by vertical gaps that run its whole height (a table beside a column
   of body text is looked for in its own region, so it does not swallow the text);
3. tables are found in each region on the pieces; a line one of whose pieces went into a table goes
   into it whole (its other pieces too), the other lines stay as OCR read them.
"""

from __future__ import annotations

from dataclasses import dataclass

from ocrserve.engines.lite.tables import TableItem, detect_tables
from ocrserve.ingest.pdf.textlayer import Line


@dataclass
class OcrLine(Line):
    """An OCR line with its words: (text, x0, x1) in the line's coordinates, left to right."""

    words: tuple[tuple[str, float, float], ...] = ()


def scaled(l: Line, f: float, dx: float, dy: float) -> Line:
    """A line in another frame (x * f + dx, y * f + dy), words too."""
    words = tuple((t, a * f + dx, b * f + dx) for t, a, b in getattr(l, "words", ()))
    return OcrLine(
        l.text,
        l.x0 * f + dx,
        l.y0 * f + dy,
        l.x1 * f + dx,
        l.y1 * f + dy,
        l.size,
        l.bold,
        l.score,
        l.angle,
        words=words,
    )


COARSE, FINE = 0.5, 0.2  # word gaps (of the line's height) that cut a line into pieces


def split_words(line: Line, gap: float = FINE) -> list[Line]:
    """A line cut at word gaps wider than `gap` of its height (each piece as tight as its words);
    the line itself when it has no words or they do not spell its text."""
    words = getattr(line, "words", ())
    if not words or "".join(t for t, _, _ in words).replace(" ", "") != line.text.replace(" ", ""):
        return [line]
    pieces: list[list[tuple[str, float, float]]] = [[words[0]]]
    for w in words[1:]:
        if w[1] - pieces[-1][-1][2] > gap * line.h:
            pieces.append([w])
        else:
            pieces[-1].append(w)
    return [
        Line(" ".join(t for t, _, _ in p), p[0][1], line.y0, p[-1][2], line.y1, line.size, line.bold, line.score)
        for p in pieces
    ]


def _sentence(text: str) -> bool:
    """A line of running text: long, of four words or more (not numbers)."""
    words = [w for w in text.split() if sum(ch.isalpha() for ch in w) >= 2]
    return len(text) >= 25 and len(words) >= 4


def _prose(lines: list[Line]) -> bool:
    """Lines of running text: most are long, several words each."""
    return len(lines) >= 3 and sum(1 for l in lines if _sentence(l.text)) >= 0.5 * len(lines)


def regions(lines: list[Line], min_gap: float) -> list[list[Line]]:
    """Lines cut into side-by-side regions by vertical gaps (at least `min_gap` wide) that no line
    crosses over the page's whole height, where one side is running text (a table's own column gaps
    run its whole height too on a page that is only the table)."""
    if not lines:
        return []
    ivs = sorted((l.x0, l.x1) for l in lines)
    cuts: list[float] = []
    end = ivs[0][1]
    for a, b in ivs[1:]:
        if a - end >= min_gap:
            cuts.append((a + end) / 2)
        end = max(end, b)
    edges = [-float("inf"), *cuts, float("inf")]
    parts = [[l for l in lines if a <= l.cx < b] for a, b in zip(edges, edges[1:])]
    out: list[list[Line]] = []
    for part in parts:
        if out and not _prose(out[-1]) and not _prose(part):
            out[-1] = out[-1] + part
        else:
            out.append(part)
    return [r for r in out if r]


def ocr_tables(
    lines: list[Line], width: float, lh: float, rotated: list[Line]
) -> tuple[list[TableItem], list[Line], list[Line]]:
    """Tables among an OCR page's lines, found on word pieces in each region ->
    (tables, lines not in a table (pieces of a line a table took part of), rotated lines not used)."""
    owner: dict[int, Line] = {}
    tables: list[TableItem] = []
    left: list[Line] = []  # pieces of lines a table took that stayed outside it

    def cut(ls: list[Line], gap: float) -> list[Line]:
        out = []
        for l in ls:
            for p in split_words(l, gap):
                owner[id(p)] = l
                out.append(p)
        return out

    def owners(t: TableItem) -> list[Line]:
        return list({id(owner[id(p)]): owner[id(p)] for p in t.lines if id(p) in owner}.values())

    for region in regions(lines, 0.6 * lh):
        # where the tables are: pieces cut at wide gaps only (OCR's word boxes are rough: a heading or a
        # list item cut at a word space would pass for a row of cells)
        coarse = cut(region, COARSE)
        found, _, rotated = detect_tables(coarse, width, lh, rotated, word_gap=0.6)
        for t in found:
            mine = owners(t)
            if _prose(mine):
                continue  # columns of running text cut at their word gaps are no table
            # its cells: the same lines cut at every gap wider than a space, when that gives the same
            # rows and more cells (narrow columns whose gap the detector nearly closed: "2021 Share")
            pieces = coarse
            fine_pieces = cut(mine, FINE)
            fine, _, _ = detect_tables(fine_pieces, width, lh, rotated, word_gap=0.6)
            cells = sum(len(r) for r in t.rows)
            if (
                len(fine) == 1
                and len(fine[0].rows) == len(t.rows)
                and fine[0].columns >= t.columns
                and sum(len(r) for r in fine[0].rows) > cells
            ):
                t, pieces = fine[0], fine_pieces
            ids, taken = {id(p) for p in t.lines}, {id(l) for l in owners(t)}
            left += [p for p in pieces if id(p) not in ids and id(owner.get(id(p))) in taken]
            tables.append(t)
    used = {id(l) for t in tables for l in owners(t)}
    return tables, [l for l in lines if id(l) not in used] + left, rotated


def region_tables(
    lines: list[Line], width: float, lh: float, rotated: list[Line]
) -> tuple[list[TableItem], list[Line], list[Line]]:
    """Tables looked for in each region (`regions`) of a page's lines -> (tables, other lines, rotated
    lines not used)."""
    tables: list[TableItem] = []
    rest: list[Line] = []
    for region in regions(lines, 0.6 * lh):
        found, others, rotated = detect_tables(region, width, lh, rotated)
        tables += found
        rest += others
    return tables, rest, rotated
