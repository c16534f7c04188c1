"""List markers and section numbers: what makes a line a list item or a numbered heading.

- A list marker (a bullet glyph, "1." / "a)" / "(iv)") set apart from its text, often in a larger
  font (a word processor's hanging indent: the bullet at one tab stop, the text at the next), is its
  own fragment in the text layer: `join_markers` puts it in front of the text on its row, in the
  text's size and style, so the line is a list item and the glyph's size makes no heading.
- A numbered section heading ("5.1 Hyper Parameter Optimization") reads as a heading when it stands
  alone on a short line even in the body's font (`section_heading`); its numbering's depth is its
  level ("5.1" -> 2, "5.1.2" -> 3: `section_level`).
"""

from __future__ import annotations

import re

from ocrserve.ingest.pdf.bidi import mostly_rtl
from ocrserve.ingest.pdf.textlayer import Line

BULLETS = (
    "\u2022\u00b7\u25aa\u25ab\u25cf\u25cb\u25e6\u2023\u2043\u25a0\u25a1\u2219\u27a2\u2794\u25ba\u25b8\u2013\u2014*>\\-"
)
_GLYPHS = set(BULLETS) - set("\u2013\u2014*>\\-")  # unambiguous bullets (not dashes, stars, arrows)
_MARKER = re.compile(rf"^\s*(?:[{BULLETS}]|\(?(?:\d{{1,3}}|[a-hA-H]|[ivxIVX]{{1,4}})[.)])\s*$")
_SECTION = re.compile(r"^(\d{1,2}(?:\.\d{1,2}){1,3})\.?\s+(\S.*)$")


def is_marker(text: str) -> bool:
    """A list marker alone: a bullet glyph, or an item number / letter with its dot or parenthesis."""
    return bool(_MARKER.match(text))


_NUMBER = re.compile(r"^\s*(\d{1,2}(?:\.\d{1,2}){0,3}|[A-Z]|[IVX]{1,4})\.?\s*$")


def join_section_numbers(lines: list[Line]) -> list[Line]:
    """A section number set apart from its title ("2.1" a quad before "Overview", as LaTeX sets it) joins
    the title on its row when both are bold or set larger than the page's text, in one size: one
    heading "2.1 Overview", not "## 2.1" and "## Overview"."""
    sizes = sorted(l.size or l.h for l in lines)
    if not sizes:
        return lines
    body = sizes[len(sizes) // 2]
    out = list(lines)
    for n in [l for l in lines if not l.angle and _NUMBER.match(l.text)]:
        near = [
            t
            for t in out
            if t is not n
            and not t.angle
            and t.text[:1].isalpha()
            and n.y0 <= t.cy <= n.y1
            and 0 <= t.x0 - n.x1 <= 3 * t.h
            and 0.85 <= (n.size or n.h) / max(t.size or t.h, 1e-6) <= 1.18
            and ((n.bold and t.bold) or (t.size or t.h) >= 1.15 * body)
        ]
        if not near:
            continue
        t = min(near, key=lambda t: t.x0)
        t.text, t.x0 = f"{n.text.strip()} {t.text}", n.x0
        out.remove(n)
    return out


def join_markers(lines: list[Line]) -> list[Line]:
    """Each list marker fragment joins the text just after it on its row (to its right; to its left in a
    right-to-left line), within about three of the text's line heights; the line keeps the text's
    size, weight and vertical extent. Section numbers join their titles first (`join_section_numbers`)."""
    lines = join_section_numbers(lines)
    markers = [l for l in lines if not l.angle and is_marker(l.text)]
    if not markers:
        return lines
    texts = [l for l in lines if not l.angle and not is_marker(l.text)]
    taken: dict[int, Line] = {}  # id of a text line -> the marker joining it
    for m in sorted(markers, key=lambda l: l.x0):
        best, best_gap = None, 0.0
        for t in texts:
            if id(t) in taken or not (m.y0 <= t.cy <= m.y1 or t.y0 <= m.cy <= t.y1):
                continue
            if m.text.strip()[:1] not in _GLYPHS and not (t.text[:1].isalpha() and len(t.text.split()) >= 2):
                continue  # a dash or a number alone may be a table's cell: only before words
            gap = m.x0 - t.x1 if mostly_rtl(t.text) else t.x0 - m.x1
            if -0.3 * t.h <= gap <= 3 * t.h and (best is None or gap < best_gap):
                best, best_gap = t, gap
        if best is not None:
            taken[id(best)] = m
    if not taken:
        return lines
    used = {id(m) for m in taken.values()}
    out: list[Line] = []
    for l in lines:
        if id(l) in used:
            continue
        mark = taken.get(id(l))
        if mark is None:
            out.append(l)
            continue
        out.append(
            Line(
                f"{mark.text.strip()} {l.text}",
                min(mark.x0, l.x0),
                l.y0,
                max(mark.x1, l.x1),
                l.y1,
                l.size,
                l.bold,
                l.score,
            )
        )
    return out


def section_heading(text: str) -> bool:
    """A numbered section heading's shape: "5.1 Hyper Parameter Optimization" (two levels or more, a
    capital after the number, a dozen words at most, no sentence end, not a contents line's page number)."""
    m = _SECTION.match(text.strip())
    if not m:
        return False
    rest = m.group(2)
    words = rest.split()
    return (
        rest[:1].isupper()
        and len(words) <= 12
        and not rest.endswith((".", ",", ";", ":"))
        and not words[-1].isdigit()
        and sum(1 for w in words if w[:1].isalpha()) >= 1
    )


def section_level(text: str) -> int | None:
    """The heading level a section number gives ("5.1" -> 2, "5.1.2" -> 3), or None (no number of two
    levels or more)."""
    m = _SECTION.match(text.strip())
    return min(m.group(1).count(".") + 1, 6) if m else None
