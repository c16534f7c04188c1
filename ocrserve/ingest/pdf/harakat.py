"""Vocalised right-to-left rows (Arabic harakat, Hebrew points) rebuilt from the glyphs' positions.

Typesetters of fully vocalised text (classical Arabic, the Quran) draw every mark (fatha, kasra, shadda,
sukun, ...) as its own glyph over or under its letter, often in a separate text object and before its
letter. pdfium's text page then loses the thread: its own bidi pass splits the row into fragments
(line breaks between them), puts marks on the neighbouring letter or alone between spaces, and adds
spaces inside words ("\u0628\u0650 \u0650\u0633\u0645" for "\u0628\u0650\u0633\u0652\u0645\u0650").
The characters' boxes are right, so a row that holds such marks is rebuilt from them: each mark joins
the letter whose box holds its centre (NFC), the row's glyphs are taken left to right, a space goes where
two glyphs are apart by more than a word gap (the marks' spaces and pdfium's are dropped), and the
bidi reorder of `ocrserve.ingest.pdf.bidi` turns the row into logical order (numbers and Latin words
inside keep theirs). A row is cut where its glyphs are apart by more than a few letters (columns, table
cells) and each piece is rebuilt on its own. Rows without such marks are left to pdfium's order.
"""

from __future__ import annotations

import bisect
import unicodedata
from dataclasses import replace

from ocrserve.ingest.pdf.bidi import is_rtl, logical_permutation
from ocrserve.ingest.pdf.chars import Char, _off_axis

WORD_GAP = 0.1  # of the row's glyph height: joined letters touch, words are a space apart
CUT_GAP = 1.5  # of the row's glyph height: a gap that no line of text has inside it


def _rtl_mark(ch: str) -> bool:
    """A combining mark of the Hebrew or Arabic blocks (points, harakat, Quranic marks)."""
    return bool(ch) and unicodedata.category(ch[0]) == "Mn" and "\u0591" <= ch[0] <= "\u08ff"


def _boxed(c: Char) -> bool:
    return not c.generated and not c.text.isspace() and c.x1 > c.x0 and c.y1 > c.y0


def _rows(idx: list[int], chars: list[Char]) -> list[list[int]]:
    """Characters (indices) grouped into rows by their vertical extents, top to bottom."""
    rows: list[tuple[float, float, list[int]]] = []
    for i in sorted(idx, key=lambda k: (chars[k].y0 + chars[k].y1) / 2):
        c = chars[i]
        h = c.y1 - c.y0
        if rows:
            y0, y1, members = rows[-1]
            if min(y1, c.y1) - max(y0, c.y0) >= 0.5 * min(y1 - y0, h):
                members.append(i)
                continue
        rows.append((c.y0, c.y1, [i]))
    return [m for _, _, m in rows]


def _far(base: Char, steps: int) -> float:
    """A small cost for a base drawn further from its mark in content order (ties go to the nearest)."""
    return 0.02 * (base.y1 - base.y0) * min(abs(steps), 10)


def _candidates(row: list[int], chars: list[Char]) -> tuple[list[int], dict[int, list[int]]]:
    """A row's bases (content order) and, per mark, the bases whose boxes hold the mark's centre."""
    bases = sorted(i for i in row if not _rtl_mark(chars[i].text))
    cands: dict[int, list[int]] = {}
    for m in (i for i in row if _rtl_mark(chars[i].text)):
        cx = (chars[m].x0 + chars[m].x1) / 2
        cands[m] = [b for b in bases if chars[b].x0 - 0.5 <= cx <= chars[b].x1 + 0.5]
    return bases, cands


def _neighbour(bases: list[int], m: int, side: int) -> int | None:
    """The base drawn right after the mark (side 1) or right before it (-1) in content order."""
    k = bisect.bisect_left(bases, m)
    if side > 0:
        return bases[k] if k < len(bases) else None
    return bases[k - 1] if k > 0 else None


def mark_side(rows: list[list[int]], chars: list[Char]) -> int:
    """Where a page's typesetter draws a mark in the content stream: just before its letter (1), just
    after it (-1), or either (0), from the marks over one letter only (two to one at least)."""
    after = before = 0
    for row in rows:
        bases, cands = _candidates(row, chars)
        for m, cs in cands.items():
            if len(cs) == 1:
                after += _neighbour(bases, m, 1) == cs[0]
                before += _neighbour(bases, m, -1) == cs[0]
    return 1 if after > 2 * before else -1 if before > 2 * after else 0


def _attach(row: list[int], chars: list[Char], side: int) -> dict[int, list[int]]:
    """Each mark -> the base whose box holds its centre; a mark over no base stays alone (not in the
    result). Where several boxes hold it (joined letters' boxes overlap, a font sets a mark off its
    letter's centre), the base drawn next to it on the page's side (`mark_side`) wins, else the
    nearest centre."""
    bases, cands = _candidates(row, chars)
    out: dict[int, list[int]] = {}
    for m, cs in cands.items():
        if not cs:
            continue
        cx = (chars[m].x0 + chars[m].x1) / 2
        best = min(cs, key=lambda b: abs((chars[b].x0 + chars[b].x1) / 2 - cx) + _far(chars[b], b - m))
        near = _neighbour(bases, m, side) if side else None
        out.setdefault(near if len(cs) > 1 and near in cs else best, []).append(m)
    return out


def _ltr_runs_rightwards(units: list[Char]) -> list[Char]:
    """Runs of characters that are neither right to left nor spaces (a number, a Latin word) left to
    right, as pdfium hands them over: the line builder joins them by their left-to-right gaps."""
    out = list(units)
    i = 0
    while i < len(out):
        if is_rtl(out[i].text) or out[i].text.isspace():
            i += 1
            continue
        j = i
        while j < len(out) and not is_rtl(out[j].text) and not out[j].text.isspace():
            j += 1
        out[i:j] = sorted(out[i:j], key=lambda c: c.x0)
        i = j
    return out


def _visual(units: list[tuple[int, Char]], chars: list[Char], bases: list[int]) -> list[Char]:
    """(content index, glyph) -> the glyphs left to right by their centres. Two glyphs that stand over
    each other (letters a font stacks, meem over jeem) keep the order the content stream gives them
    (it steps leftwards, logical order, or rightwards, visual order, for most of the row)."""
    xs = [chars[b].x0 for b in sorted(bases)]
    leftwards = sum(1 for a, b in zip(xs, xs[1:]) if b < a - 0.01) >= sum(1 for a, b in zip(xs, xs[1:]) if b > a + 0.01)
    out = sorted(units, key=lambda u: (u[1].x0 + u[1].x1) / 2)
    for k in range(len(out) - 1):
        (ia, a), (ib, b) = out[k], out[k + 1]
        narrow = min(a.x1 - a.x0, b.x1 - b.x0)
        if min(a.x1, b.x1) - max(a.x0, b.x0) > 0.6 * narrow and (ia < ib) == leftwards:
            out[k], out[k + 1] = out[k + 1], out[k]
    return [c for _, c in out]


def _rebuild(row: list[int], chars: list[Char], side: int = 0) -> list[Char]:
    """One row's characters -> its pieces in logical order, a space between words, a line break after each."""
    marks = [i for i in row if _rtl_mark(chars[i].text)]
    bases = [i for i in row if not _rtl_mark(chars[i].text)]
    on = _attach(row, chars, side)
    attached = {m for v in on.values() for m in v}
    alone = [m for m in marks if m not in attached]
    placed: list[tuple[int, Char]] = []
    for b in bases:
        c = chars[b]
        if b in on:
            ms = [chars[m] for m in sorted(on[b])]
            text = unicodedata.normalize("NFC", c.text + "".join(m.text for m in ms))
            c = replace(c, text=text, y0=min([c.y0, *(m.y0 for m in ms)]), y1=max([c.y1, *(m.y1 for m in ms)]))
        placed.append((b, c))
    placed += [(m, chars[m]) for m in alone]
    units = _visual(placed, chars, bases)
    hs = sorted(chars[b].y1 - chars[b].y0 for b in bases) or [1.0]
    h = hs[len(hs) // 2]
    pieces: list[list[Char]] = []
    for c in units:
        if pieces and c.x0 - max(u.x1 for u in pieces[-1]) <= CUT_GAP * h:
            pieces[-1].append(c)
        else:
            pieces.append([c])
    out: list[Char] = []
    rtl_row = sum(1 for c in units if is_rtl(c.text)) * 2 >= len(units)
    for piece in reversed(pieces) if rtl_row else pieces:
        vis: list[Char] = []
        for c in piece:
            if vis and c.x0 - max(u.x1 for u in vis if not u.generated) > WORD_GAP * h:
                vis.append(Char(" ", c.x0, c.y0, c.x0, c.y1, 0.0, -1, c.invisible, True))
            vis.append(c)
        out += _ltr_runs_rightwards([vis[k] for k in logical_permutation([u.text for u in vis])])
        out += [Char(t, 0, 0, 0, 0, 0.0, -1, False, True) for t in "\r\n"]
    return out


def rebuild_vocalised_rows(chars: list[Char]) -> list[Char]:
    """Characters in content order -> the same, with every row that holds right-to-left marks rebuilt
    from its glyphs' positions (logical order, marks on their letters, spaces from the gaps), in the
    place of its first character. Rows without such marks, and pages without them, are as they came."""
    if not any(_rtl_mark(c.text) for c in chars):
        return chars
    boxed = [i for i, c in enumerate(chars) if _boxed(c) and not _off_axis(c.angle)]
    rows = [r for r in _rows(boxed, chars) if any(_rtl_mark(chars[i].text) for i in r)]
    if not rows:
        return chars
    taken: dict[int, list[Char]] = {}
    drop: set[int] = set()
    side = mark_side(rows, chars)
    for r in rows:
        taken[min(r)] = _rebuild(r, chars, side)
        drop.update(r)
    out: list[Char] = []
    for i, c in enumerate(chars):
        if i in taken:
            out += [Char(t, 0, 0, 0, 0, 0.0, -1, False, True) for t in "\r\n"]
            out += taken[i]
        if i in drop:
            continue
        out.append(c)
    return out
