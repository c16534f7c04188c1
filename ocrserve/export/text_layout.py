"""The searchable PDF's text layer, laid out (pure: no PDF here; searchable_pdf.py writes it).

The Document keeps block boxes, not line boxes, so each block's lines are laid out inside its box: the
number of lines and the line height are fitted to the box from the text length (an average character
is CHAR_WIDTH line heights wide), each line is stretched to the box width (the last line of a paragraph
to its length at the width of the full lines; without wrapping, the longest line spans the box) and the
line band spans the full line height, so selecting and searching in a viewer find the words in the
region where they are. Figures get no text (their description is not on the page); a table's cells go
row by row.
"""

from __future__ import annotations

import math
import re
import unicodedata
from dataclasses import dataclass

from ocrserve.document import Block
from ocrserve.labels import FIGURE_LABELS

CHAR_WIDTH = 0.42  # average character width / line height (about 0.5 em at a 1.2 line spacing)
_WS = re.compile(r"\s+")

Box = tuple[float, float, float, float]  # x0, y0, x1, y1 in displayed page space


@dataclass
class PlacedLine:
    """One line of the text layer in displayed page space (top-left origin, y down, points)."""

    text: str
    x0: float
    top: float
    width: float
    height: float


def _clean(text: str) -> str:
    text = "".join(
        " " if ch.isspace() else ch
        for ch in text
        if ch.isspace() or unicodedata.category(ch) not in ("Cc", "Cs", "Co", "Cn")
    )
    return _WS.sub(" ", text).strip()


def _units(text: str) -> int:
    return sum(2 if unicodedata.east_asian_width(ch) in "WF" else 1 for ch in text)


def _wrap(line: str, width: int) -> list[str]:
    """Greedy word wrap at `width` half-width units; words longer than a line are cut."""
    out: list[str] = []
    cur, cur_u = "", 0
    for word in line.split(" "):
        wu = _units(word)
        if cur and cur_u + 1 + wu <= width:
            cur, cur_u = f"{cur} {word}", cur_u + 1 + wu
            continue
        if cur:
            out.append(cur)
        cur, cur_u = "", 0
        while wu > width:  # a long word (or a CJK run without spaces) across lines
            piece, pu = "", 0
            for ch in word:
                u = _units(ch)
                if piece and pu + u > width:
                    break
                piece, pu = piece + ch, pu + u
            out.append(piece)
            word = word[len(piece) :]
            wu = _units(word)
        cur, cur_u = word, wu
    if cur:
        out.append(cur)
    return out


def block_lines(block: Block) -> list[str]:
    """The text of a block as the lines the layer writes (empty for figures)."""
    if block.label in FIGURE_LABELS:
        return []
    if block.label == "Table" and "<t" in (block.html or ""):
        from selectolax.lexbor import LexborHTMLParser

        tree = LexborHTMLParser(block.html)
        rows = [
            _clean(" ".join(c.text(deep=True, separator=" ") or "" for c in tr.css("td, th"))) for tr in tree.css("tr")
        ]
        rows = [r for r in rows if r]
        if rows:
            return rows
    return [ln for ln in (_clean(x) for x in (block.text or "").split("\n")) if ln]


def layout_block(lines: list[str], box: Box) -> list[PlacedLine]:
    """Lay a block's lines out inside its box: fit the line count and height, wrap, stretch."""
    x0, y0, x1, y1 = box
    W, H = x1 - x0, y1 - y0
    lines = [ln for ln in lines if ln]
    if not lines or W <= 0 or H <= 0:
        return []
    total = sum(_units(ln) for ln in lines)
    # k lines of height H/k hold about W / (CHAR_WIDTH * H/k) units each: k*k ~ total * CHAR_WIDTH * H / W
    k = max(len(lines), int(math.sqrt(total * CHAR_WIDTH * H / W)))
    while True:
        lh = H / k
        per_line = max(1, int(W / (CHAR_WIDTH * lh)))
        wrapped = [
            (piece, i == len(parts) - 1)
            for ln in lines
            for parts in [_wrap(ln, per_line)]
            for i, piece in enumerate(parts)
        ]
        if len(wrapped) <= k or per_line == 1:
            break
        k += 1
    lh = H / len(wrapped)
    # the box is as wide as its longest line: full lines of a wrapped paragraph span it, and give
    # the character width for the last lines; without wrapping, the longest line spans it
    full = [_units(t) for t, last in wrapped if not last]
    unit_w = W / (sum(full) / len(full)) if full else W / max(_units(t) for t, _ in wrapped)
    placed = []
    for j, (text, last) in enumerate(wrapped):
        width = min(W, _units(text) * unit_w) if last else W
        placed.append(PlacedLine(text, x0, y0 + j * lh, max(width, 1e-3), lh))
    return placed


def page_layout(blocks: list[Block], width: float, height: float, regions: list[Box] | None = None) -> list[PlacedLine]:
    """Text-layer lines of a page of `width` x `height` (displayed page units); with `regions`,
    only the blocks lying mostly inside one of them."""
    out: list[PlacedLine] = []
    for b in blocks:
        if len(b.bbox_norm) != 4 or not all(math.isfinite(v) for v in b.bbox_norm):
            continue
        nx0, ny0, nx1, ny1 = (min(max(v, 0.0), 1.0) for v in b.bbox_norm)
        box = (nx0 * width, ny0 * height, nx1 * width, ny1 * height)
        if regions is not None and not any(_inside_share(box, r) >= 0.5 for r in regions):
            continue
        out += layout_block(block_lines(b), box)
    return out


def _inside_share(box: Box, region: Box) -> float:
    ix = max(0.0, min(box[2], region[2]) - max(box[0], region[0]))
    iy = max(0.0, min(box[3], region[3]) - max(box[1], region[1]))
    area = max((box[2] - box[0]) * (box[3] - box[1]), 1e-9)
    return ix * iy / area
