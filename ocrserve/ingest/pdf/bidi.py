"""Right-to-left text (Arabic, Hebrew, ...) in the text layer: presentation forms, logical order.

pdfium's text page already puts the characters of a line in logical order (its own bidi pass over
the glyphs' positions, whatever order the content stream drew them in): the characters of an RTL
word then step leftwards on the page, numbers and Latin words inside the line rightwards. The line
builder (ocrserve.ingest.pdf.chars) follows them either way. Where a line's right-to-left
characters still come in visual order (they step rightwards: a text layer without pdfium's
reordering), `logical_units` turns the line around with a small UAX #9 reorder of one line (the
paragraph direction from the line's strong characters, W7-style numbers after Latin text, N1
neutrals, L2 run reversal), combining marks kept after their base and ligature glyphs whole. The
letters of one glyph (a lam-alef ligature that the font's ToUnicode maps to lam and alef: pdfium hands
them over reversed) are put in the order of Unicode's ligature forms.

Presentation forms (U+FB1D-U+FDFF, U+FE70-U+FEFF: the joined shapes of Arabic letters, Hebrew
ligatures) read as their base letters (NFKC), so words match their plain spelling.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence

_STRONG_RTL = frozenset(("R", "AL"))


def _ligatures() -> frozenset[str]:
    """The letters of each right-to-left ligature presentation form, in logical order ("\u0644\u0627")."""
    out = set()
    for cp in (*range(0xFB1D, 0xFE00), *range(0xFE70, 0xFEFF)):
        s = unicodedata.normalize("NFKC", chr(cp))
        if len(s) > 1 and all(unicodedata.bidirectional(c) in _STRONG_RTL for c in s):
            out.add(s)
    return frozenset(out)


_LIGATURES = _ligatures()


def presentation_to_base(ch: str) -> str:
    """A presentation form -> its base letter(s) (NFKC); any other character as it is."""
    if ch and ("\ufb1d" <= ch[0] <= "\ufdff" or "\ufe70" <= ch[0] <= "\ufefe"):
        return unicodedata.normalize("NFKC", ch)
    return ch


def is_rtl(text: str) -> bool:
    """The text's first character is a strong right-to-left one."""
    return bool(text) and unicodedata.bidirectional(text[0]) in _STRONG_RTL


def _kind(unit: str) -> str:
    """R (right to left), L, N (number) or x (neutral) for a unit (its first character)."""
    t = unicodedata.bidirectional(unit[0]) if unit else "WS"
    if t in _STRONG_RTL:
        return "R"
    if t == "L":
        return "L"
    if t in ("EN", "AN"):
        return "N"
    return "x"


def visual_order(xs: Sequence[float]) -> bool:
    """Positions (left edges, content order) of a line's right-to-left characters step rightwards:
    the line came in visual order."""
    right = sum(1 for a, b in zip(xs, xs[1:]) if b > a + 0.01)
    left = sum(1 for a, b in zip(xs, xs[1:]) if b < a - 0.01)
    return right > left


def logical_units(units: Sequence[str]) -> list[str]:
    """One line's units (a character or a ligature glyph's characters) in visual order, left to right
    -> logical order. Combining marks stay after the unit they were drawn with."""
    merged: list[str] = []
    for u in units:
        if merged and u and unicodedata.category(u[0]).startswith("M"):
            merged[-1] += u
        else:
            merged.append(u)
    return [merged[i] for i in logical_permutation(merged)]


def logical_permutation(units: Sequence[str]) -> list[int]:
    """The indices of one line's units (visual order, left to right; combining marks already with their
    unit) in logical order."""
    merged = units
    kinds = [_kind(u) for u in merged]
    n_r, n_l = kinds.count("R"), kinds.count("L")
    if not n_r:
        return list(range(len(merged)))
    base = 1 if n_r >= n_l else 0
    edge = "R" if base else "L"  # the direction at the line's start and end (sos / eos)
    # a number whose nearest strong neighbour on its left is Latin reads with it (W7, seen visually)
    strong_left = edge
    for i, k in enumerate(kinds):
        if k in ("R", "L"):
            strong_left = k
        elif k == "N" and strong_left == "L":
            kinds[i] = "L"
    # neutrals between two of one direction take it (numbers count as right to left), else the base
    as_dir = ["R" if k == "N" else k for k in kinds]
    resolved = list(kinds)
    i = 0
    while i < len(kinds):
        if kinds[i] != "x":
            i += 1
            continue
        j = i
        while j < len(kinds) and kinds[j] == "x":
            j += 1
        before = as_dir[i - 1] if i > 0 else edge
        after = as_dir[j] if j < len(kinds) else edge
        d = before if before == after else ("R" if base else "L")
        resolved[i:j] = [d] * (j - i)
        i = j
    levels = []
    for k in resolved:
        if k == "R":
            levels.append(1 if base == 0 else base)
        elif k == "N":
            levels.append(2)
        else:  # L
            levels.append(2 if base else 0)
    # L2: reverse every run at or above each level, from the highest down to 1
    order = list(range(len(merged)))
    for level in range(max(levels), 0, -1):
        i = 0
        while i < len(order):
            if levels[order[i]] < level:
                i += 1
                continue
            j = i
            while j < len(order) and levels[order[j]] >= level:
                j += 1
            order[i:j] = order[i:j][::-1]
            i = j
    return order


def _glyphs(chars: Sequence) -> list[list]:
    """Consecutive characters that share one glyph's box (a glyph mapped to several letters: an
    Arabic lam-alef ligature read as lam and alef) grouped; every other character alone."""
    out: list[list] = []
    for c in chars:
        last = out[-1][-1] if out else None
        if last is not None and c.x1 > c.x0 and abs(c.x0 - last.x0) < 0.01 and abs(c.x1 - last.x1) < 0.01:
            out[-1].append(c)
        else:
            out.append([c])
    return out


def _reversed_glyph(g: list) -> bool:
    text = "".join(c.text for c in g)
    return len(g) > 1 and text not in _LIGATURES and all(is_rtl(c.text) for c in g)


def line_text(chars: Sequence) -> str:
    """A line's characters (objects with text, x0 and x1; content order, spaces included) -> its text in
    logical order: as they come, unless their right-to-left characters come in visual order. pdfium's
    reordering hands the letters of a right-to-left glyph that the font's ToUnicode maps to several
    over reversed (not those of a presentation form it decomposes itself): unless they spell a ligature
    form's letters in order, they are turned back."""
    glyphs = _glyphs(chars)
    if visual_order([g[0].x0 for g in glyphs if is_rtl(g[0].text)]):
        return "".join(logical_units(["".join(c.text for c in g) for g in glyphs]))
    glyphs = _numbers_rightwards(glyphs)
    return "".join("".join(c.text for c in (g[::-1] if _reversed_glyph(g) else g)) for g in glyphs)


_NUMERIC = frozenset(("EN", "AN", "CS", "ES", "ET"))


def _numbers_rightwards(glyphs: list[list]) -> list[list]:
    """A number ("۱.۲.۲", "١-٣") whose glyphs come stepping leftwards, as pdfium hands some
    over inside right-to-left text, turned to read left to right as on the page (a number run is
    left to right in the bidi algorithm: the text then shows as the page does)."""
    out = list(glyphs)
    i = 0
    while i < len(out):
        j = i
        while j < len(out) and len(out[j]) == 1 and unicodedata.bidirectional(out[j][0].text[:1] or " ") in _NUMERIC:
            j += 1
        run = out[i:j]
        if sum(1 for g in run if g[0].text.isdigit()) >= 2 and run[0][0].x0 > run[-1][0].x0:
            out[i:j] = sorted(run, key=lambda g: g[0].x0)
        i = max(j, i + 1)
    return out


def ltr_reach(chars: Sequence) -> list[float] | None:
    """Per character (objects with text, x1; content order): the right end of the run of characters
    that are not right to left starting there (to the next RTL character or line break): a number or
    Latin word in an RTL line starts at its left end, its run's right end meets the text before it.
    None when the page has no right-to-left character."""
    if not any(is_rtl(c.text) for c in chars):
        return None
    reach = [0.0] * len(chars)
    run_end = 0.0
    for i in range(len(chars) - 1, -1, -1):
        c = chars[i]
        if c.text in ("\r", "\n") or is_rtl(c.text):
            run_end = 0.0
        else:
            run_end = max(run_end, c.x1)
        reach[i] = run_end if run_end else c.x1
    return reach


def mostly_rtl(text: str) -> bool:
    """More strong right-to-left characters than left-to-right ones: a line that reads from the right."""
    kinds = [unicodedata.bidirectional(c) for c in text]
    return sum(k in _STRONG_RTL for k in kinds) > kinds.count("L")
