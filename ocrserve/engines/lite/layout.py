"""Lines -> layout blocks in reading order, written as Chandra's raw HTML layout blocks.

Works the same on text-layer lines (PDF points) and OCR lines (image pixels): every threshold is
relative to the page's typical line height. Steps:

1. merge line fragments on the same row that are closer than about one line height; rotated
   lines (`Line.angle`) stay apart: column heads of a table, else margin text out of the flow;
2. page headers / footers (ocrserve.engines.lite.headers), also lines the document's other pages
   repeat (`running`);
3. tables (ocrserve.engines.lite.tables): header rows, spans, multi-line cells;
4. reading order by recursive XY-cut (ocrserve.engines.lite.order);
5. paragraphs from consecutive lines (vertical gap, size, indentation of the previous line's end),
   headings by relative font size (or bold short paragraphs), bullet / numbered lists.
"""

from __future__ import annotations

import html
import re
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from statistics import median

from ocrserve.engines.lite.boxes import early_tables
from ocrserve.engines.lite.code import code_continues, code_html, code_page
from ocrserve.engines.lite.columns import drop_caps
from ocrserve.engines.lite.figures import FigureItem, figure_text
from ocrserve.engines.lite.grid import region_tables
from ocrserve.engines.lite.headers import metric as _metric
from ocrserve.engines.lite.headers import split_headers_footers
from ocrserve.engines.lite.marks import join_markers, section_heading, section_level
from ocrserve.engines.lite.order import leaf_order as _leaf_order
from ocrserve.engines.lite.order import reading_order
from ocrserve.engines.lite.order import vfrac_overlap as _vfrac_overlap
from ocrserve.engines.lite.tables import TableItem, table_html
from ocrserve.ingest.pdf.bidi import mostly_rtl
from ocrserve.ingest.pdf.textlayer import Line

Box = tuple[float, float, float, float]


Item = Line | TableItem | FigureItem


@dataclass
class LayoutBlock:
    label: str
    box: Box
    html: str


# a bullet glyph (set close to its text, without a space, too), or a dash / star / arrow and a space
_BULLET = re.compile(
    r"^\s*(?:[\u2022\u00b7\u25aa\u25ab\u25cf\u25cb\u25e6\u2023\u2043\u25a0\u25a1\u2219\u25ba\u25b8\u27a2]\s*"
    r"|[\-\u2013\u2014*>]\s+)(?=\S)"
)
_NUMBERED = re.compile(r"^\s*\(?(\d{1,3}|[a-h])[.)]\s+(?=\S)")


def _esc(text: str) -> str:
    return html.escape(text, quote=False)


def _union(items: Sequence[Item]) -> Box:
    return (min(i.x0 for i in items), min(i.y0 for i in items), max(i.x1 for i in items), max(i.y1 for i in items))


def _weighted_median(values: list[tuple[float, int]]) -> float:
    if not values:
        return 1.0
    values = sorted(values)
    total = sum(w for _, w in values)
    acc = 0
    for v, w in values:
        acc += w
        if acc >= total / 2:
            return v
    return values[-1][0]


# ---------------------------------------------------------------- 1. fragments


def _gutter(lines: list[Line], a: Line, b: Line) -> bool:
    """The space between a and b (one row) is a column gutter: the lines just above and below
    leave it empty too."""
    g0, g1, h = a.x1, b.x0, max(a.h, b.h)
    near = [l for l in lines if l is not a and l is not b and abs(l.cy - a.cy) <= 3 * h and l.x1 > a.x0 and l.x0 < b.x1]
    above = [l for l in near if l.cy < a.cy - 0.5 * h]
    below = [l for l in near if l.cy > a.cy + 0.5 * h]
    # a column's first (last) line: two rows below (above) it, none on the other side
    if not (above and below) and len({round(l.cy / h) for l in above + below}) < 2:
        return False
    e = 0.2 * h
    return not any(l.x0 < g1 - e and l.x1 > g0 + e for l in above + below)


def _justified(lines: list[Line], a: Line, b: Line) -> bool:
    """a and b are words of a justified line: whole lines of one paragraph span them above and below."""
    h = max(a.h, b.h)

    def spans(l: Line, reach: float) -> bool:
        return l.x0 <= a.x0 + h and l.x1 >= b.x1 - h and 0.8 * h <= abs(l.cy - a.cy) <= reach * h

    above = sum(1 for l in lines if spans(l, 3.2) and l.cy < a.cy)
    below = any(spans(l, 2.2) and l.cy > a.cy for l in lines)
    return above >= 2 or (above >= 1 and below)  # (a paragraph's last line has none below)


def merge_fragments(lines: list[Line], gutters: Sequence[float] = ()) -> list[Line]:
    """Join fragments of one row that are closer than about a line height (not across a gutter, nor
    across the known column gutters at x positions `gutters`)."""
    out: list[Line] = []
    for ln in sorted(lines, key=lambda l: (l.x0, l.y0)):
        best: Line | None = None
        best_gap: float | None = None
        for cand in out:
            h = max(cand.h, ln.h)
            gap = ln.x0 - cand.x1
            if any(cand.x1 <= x <= ln.x0 for x in gutters):
                continue
            if (
                _vfrac_overlap(cand, ln) >= 0.6
                and 0.6 <= ln.h / cand.h <= 1.6
                and (-0.3 * h <= gap <= 0.9 * h or (0.9 * h < gap <= 3 * h and _justified(lines, cand, ln)))
            ):
                if best_gap is None or gap < best_gap:
                    best, best_gap = cand, gap
        if best is not None and best_gap is not None and best_gap > 0.3 * ln.h and _gutter(lines, best, ln):
            best = None
        if best is None:
            out.append(Line(ln.text, ln.x0, ln.y0, ln.x1, ln.y1, ln.size, ln.bold, ln.score, mono=ln.mono))
            continue
        # the fragment on the right comes first in a right-to-left line
        best.text = f"{ln.text} {best.text}" if mostly_rtl(best.text + ln.text) else f"{best.text} {ln.text}"
        n_old = max(len(best.text) - len(ln.text), 1)
        best.bold = best.bold and ln.bold
        best.mono = best.mono and ln.mono
        best.score = min(best.score, ln.score)
        best.size = best.size if best.size >= ln.size or n_old > len(ln.text) else ln.size
        best.x1 = max(best.x1, ln.x1)
        best.y0, best.y1 = min(best.y0, ln.y0), max(best.y1, ln.y1)
    return out


# ---------------------------------------------------------------- 5. blocks


def _join(lines: list[str]) -> str:
    text = ""
    for t in lines:
        t = t.strip()
        if not t:
            continue
        if not text:
            text = t
        elif text.endswith("-") and len(text) > 1 and text[-2].isalpha() and t[:1].islower():
            text = text[:-1] + t
        else:
            text = f"{text} {t}"
    return text


def _heading_level(ratio: float) -> int:
    return 1 if ratio >= 1.7 else 2 if ratio >= 1.25 else 3


@dataclass
class _Para:
    lines: list[Line]
    kind: str = "text"  # text, heading, item

    @property
    def box(self) -> Box:
        return _union(self.lines)


def build_blocks(
    lines: list[Line],
    width: float,
    height: float,
    *,
    figures: Sequence[Box] = (),
    ocr: bool = False,
    running: Collection[str] = (),
) -> list[LayoutBlock]:
    """Lines of one page -> layout blocks in reading order (headers first, footers last).

    Rotated lines (`Line.angle`) are column heads of a table right under them, or else margin
    text (watermarks, spine titles), kept out of the flow as Page-Header blocks. `running`: texts
    the document's other pages repeat (ocrserve.engines.lite.running), headers / footers here too."""
    lines = [l for l in lines if l.text.strip() and l.x1 > l.x0 and l.y1 > l.y0]
    if not lines and not figures:
        return []
    rotated = [l for l in lines if l.angle]
    if sum(len(l.text) for l in rotated) > sum(len(l.text) for l in lines if not l.angle):
        rotated = []  # the page's text is mostly slanted (no 90-degree turn rights it): read it as it is
    taken = {id(l) for l in rotated}
    lines = drop_caps([l for l in lines if id(l) not in taken])
    # key/value rows, then (OCR boxes are words or phrases) the columns and tables before joining them into lines
    pre_tables, lines, gutters, rotated = early_tables(lines, width, ocr, rotated)
    lines = merge_fragments(join_markers(lines), gutters)
    lh = median([l.h for l in lines]) if lines else 10.0
    body_metric = _weighted_median([(_metric(l), len(l.text)) for l in lines]) if lines else 1.0
    heading_ratio = 1.3 if ocr else 1.2
    headers, body, footers = split_headers_footers(lines, height, body_metric, running, width)
    tables, body, rotated = region_tables(body, width, lh, rotated)
    tables = pre_tables + tables
    figs, body = figure_text(body, lh, [FigureItem(*f) for f in figures])
    items: list[Item] = [*body, *tables, *figs]
    ordered = reading_order(items, max(0.8 * lh, 0.01 * width), hints=gutters) if items else []

    def is_heading(l: Line) -> bool:
        # (a bullet or a rule alone is no heading, however large)
        return _metric(l) >= heading_ratio * body_metric and len(l.text) <= 200 and any(c.isalnum() for c in l.text)

    # typical gap between consecutive lines of a paragraph
    gaps = []
    for a, b in zip(ordered, ordered[1:]):
        if isinstance(a, Line) and isinstance(b, Line) and min(a.x1, b.x1) > max(a.x0, b.x0):
            g = b.y0 - a.y1
            if -0.5 * lh <= g <= 1.5 * lh and abs(_metric(a) - _metric(b)) <= 0.15 * _metric(a):
                gaps.append(g)
    para_gap = (median(gaps) if gaps else 0.2 * lh) + 0.4 * lh

    blocks: list[LayoutBlock] = [
        LayoutBlock("Page-Header", _union([l]), f"<p>{_esc(l.text)}</p>") for l in _leaf_order(headers)
    ]
    blocks += [LayoutBlock("Page-Header", _union([l]), f"<p>{_esc(l.text)}</p>") for l in rotated]
    paras: list[_Para | TableItem | FigureItem] = []
    code = code_page(lines)
    for it in ordered:
        if not isinstance(it, Line):
            paras.append(it)
            continue
        if code and it.mono:  # code: one block while its lines follow closely
            last = paras[-1] if paras else None
            if isinstance(last, _Para) and last.kind == "code" and code_continues(last.lines[-1], it, lh):
                last.lines.append(it)
            else:
                paras.append(_Para([it], "code"))
            continue
        head = is_heading(it)
        bullet = bool(_BULLET.match(it.text) or _NUMBERED.match(it.text))
        prev = paras[-1] if paras else None
        if isinstance(prev, _Para) and _continues(prev, it, head, bullet, para_gap, lh, is_heading):
            prev.lines.append(it)
            continue
        # a bullet makes a list item whatever its size; a large numbered line may be a heading
        kind = "item" if _BULLET.match(it.text) else "heading" if head else "item" if bullet else "text"
        paras.append(_Para([it], kind))

    # a long run of large text is a lead paragraph, not a heading; a full line of eight words is text
    measure = median([l.w for l in lines if len(l.text.split()) >= 8] or [width])
    for p in paras:
        if isinstance(p, _Para) and p.kind == "heading":
            text = _join([l.text for l in p.lines])
            sentence_inside = re.search(r"[a-z]{2}[.;] [A-Za-z]", text) is not None and len(text.split()) > 8
            # a line of running text: it runs on (a comma, a hyphen), or it is a long sentence
            runs_on = text.endswith((",", ";", "-", "/")) or (len(text.split()) >= 10 and text[-1:] in ".:")
            full = len(text.split()) >= 8 and p.box[2] - p.box[0] >= 0.9 * measure  # a full line, a little larger
            runs_on = runs_on or (full and max(_metric(l) for l in p.lines) < 1.4 * body_metric)
            if len(p.lines) > 3 or len(text) > 200 or text[:1].islower() or sentence_inside or runs_on:
                p.kind = "text"
    # bold short paragraphs are headings too (unless bold is the body style)
    bold_share = sum(len(l.text) for l in lines if l.bold) / max(sum(len(l.text) for l in lines), 1)
    for p in paras:
        if isinstance(p, _Para) and p.kind == "text" and bold_share < 0.4:
            text = _join([l.text for l in p.lines])
            if (
                all(l.bold for l in p.lines)
                and len(p.lines) <= 2
                and len(text) <= 120
                and not text.endswith((".", ",", ";"))
            ):
                p.kind = "bold-heading"
    for p in paras:  # a numbered section heading alone on its line, in the body's font
        if isinstance(p, _Para) and p.kind == "text" and len(p.lines) == 1 and section_heading(p.lines[0].text):
            p.kind = "bold-heading"

    k = 0
    while k < len(paras):
        p = paras[k]
        if isinstance(p, TableItem):
            blocks.append(LayoutBlock("Table", _union([p]), table_html(p)))
        elif isinstance(p, FigureItem):
            blocks.append(LayoutBlock("Image", _union([p]), f'<img alt="{html.escape(p.text)}"/>'))
        elif p.kind == "item":
            items_ = [p]
            while k + 1 < len(paras):
                nxt = paras[k + 1]
                if not (isinstance(nxt, _Para) and nxt.kind == "item"):
                    break
                k += 1
                items_.append(nxt)
            blocks.append(_list_block(items_))
        elif p.kind == "code":
            blocks.append(LayoutBlock("Code-Block", p.box, code_html(p.lines)))
        elif p.kind in ("heading", "bold-heading"):
            text = _join([l.text for l in p.lines])
            if p.kind == "heading":
                level = _heading_level(max(_metric(l) for l in p.lines) / body_metric)
            else:
                level = 3
            level = section_level(text) or level
            blocks.append(LayoutBlock("Section-Header", p.box, f"<h{level}>{_esc(text)}</h{level}>"))
        else:
            blocks.append(LayoutBlock("Text", p.box, f"<p>{_esc(_join([l.text for l in p.lines]))}</p>"))
        k += 1
    blocks += [LayoutBlock("Page-Footer", _union([l]), f"<p>{_esc(l.text)}</p>") for l in _leaf_order(footers)]
    return blocks


def _continues(p: _Para, line: Line, head: bool, bullet: bool, para_gap: float, lh: float, is_heading) -> bool:
    prev = p.lines[-1]
    if bullet:
        return False
    if (p.kind == "heading") != head:
        return False
    if p.kind == "heading":
        if abs(_metric(prev) - _metric(line)) > 0.1 * _metric(prev):
            return False
    elif abs(_metric(prev) - _metric(line)) > 0.15 * max(_metric(prev), _metric(line)):
        return False
    h = min(prev.h, line.h)
    gap = line.y0 - prev.y1
    if gap < -0.6 * h or gap > para_gap:
        return False
    x0, _, x1, _ = p.box
    if min(x1, line.x1) <= max(x0, line.x0):
        return False  # no horizontal overlap: another column or region
    if prev.bold != line.bold and p.kind == "text" and len(p.lines) == 1 and prev.bold:
        return False  # a bold run-in heading line followed by body text
    if p.kind == "item":
        # continuation lines of a list item are indented past the bullet
        if mostly_rtl(p.lines[0].text):  # the bullet is on the right
            return line.x1 <= p.lines[0].x1 - 0.3 * lh
        return line.x0 >= p.lines[0].x0 + 0.3 * lh
    right = max(x1, line.x1)
    if mostly_rtl(prev.text):  # a short last line ends on the left
        short = prev.x0 > min(x0, line.x0) + 0.3 * max(right - min(x0, line.x0), 1e-6)
    else:
        short = prev.x1 < right - 0.3 * max(right - x0, 1e-6)
    if short and len(p.lines) == 1 and section_heading(prev.text):
        return False  # a numbered section heading on its own line, its paragraph below
    if short and prev.text.rstrip().endswith((".", "!", "?", ":", '"', "\u201d", "\u061f")):
        return False  # the previous line ended a paragraph early
    return True


def _list_block(items: list[_Para]) -> LayoutBlock:
    """Runs of items: numbers counting up one by one are an ordered list from their first number (exercises
    150-153: `<ol start="150">`); bullets lose their bullet; letters (a., b.) keep their marker as text."""
    runs: list[tuple[str, list[str], int]] = []  # (tag, item texts, first number)
    for it in items:
        t = _join([l.text for l in it.lines])
        m, n = _BULLET.match(t), _NUMBERED.match(t)
        if not m and n and n.group(1).isdigit():
            k = int(n.group(1))
            if runs and runs[-1][0] == "ol" and runs[-1][2] + len(runs[-1][1]) == k:
                runs[-1][1].append(t[n.end() :])
            else:
                runs.append(("ol", [t[n.end() :]], k))
            continue
        text = t[m.end() :] if m else t
        if runs and runs[-1][0] == "ul":
            runs[-1][1].append(text)
        else:
            runs.append(("ul", [text], 0))
    html = ""
    for tag, run, first in runs:
        start = f' start="{first}"' if tag == "ol" and first != 1 else ""
        html += f"<{tag}{start}>" + "".join(f"<li>{_esc(t)}</li>" for t in run) + f"</{tag}>"
    return LayoutBlock("List-Group", _union([l for it in items for l in it.lines]), html)


# ---------------------------------------------------------------- raw output


def format_bbox(box: Box, width: float, height: float, scale: int, fmt: str) -> str:
    """A box in page units -> the profile's bbox text (`[x0, y0, x1, y1]` or `x0 y0 x1 y1`)."""
    w, h = max(width, 1e-6), max(height, 1e-6)
    vals = [box[0] / w, box[1] / h, box[2] / w, box[3] / h]
    ints = [int(round(min(max(v, 0.0), 1.0) * scale)) for v in vals]
    if fmt == "space":
        return " ".join(str(v) for v in ints)
    return "[" + ", ".join(str(v) for v in ints) + "]"


def blocks_to_raw(blocks: list[LayoutBlock], width: float, height: float, scale: int, fmt: str) -> str:
    """Layout blocks -> raw output in Chandra's HTML layout-block form."""
    parts = []
    for b in blocks:
        bbox = format_bbox(b.box, width, height, scale, fmt)
        parts.append(f'<div data-bbox="{bbox}" data-label="{b.label}">{b.html}</div>')
    return "\n".join(parts)
