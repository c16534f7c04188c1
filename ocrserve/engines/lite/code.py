"""Code in a text layer: lines set in a monospaced font (`Line.mono`) on a page whose body is not, one
code block while they follow each other closely, the indentation kept from their left edges."""

from __future__ import annotations

import html
from statistics import median

from ocrserve.ingest.pdf.textlayer import Line


def code_page(lines: list[Line]) -> bool:
    """Monospaced lines are code here: the page's text is mostly in a proportional font."""
    total = sum(len(l.text) for l in lines)
    return total > 0 and sum(len(l.text) for l in lines if l.mono) < 0.5 * total


def code_continues(prev: Line, line: Line, lh: float) -> bool:
    """The next monospaced line is in the same block: below, at most one blank line apart, not left of
    the block by more than a little."""
    gap = line.y0 - prev.y1
    return -0.5 * lh <= gap <= 1.6 * lh and line.x1 > prev.x0 - 2 * lh


def code_html(lines: list[Line]) -> str:
    left = min(l.x0 for l in lines)
    cw = median(l.w / max(len(l.text), 1) for l in lines) or 1.0
    pitch = median(l.h for l in lines)
    out = []
    for k, l in enumerate(lines):
        if k and l.y0 - lines[k - 1].y1 > 0.8 * pitch:
            out.append("")  # a blank line in the code
        out.append(" " * max(int(round((l.x0 - left) / cw)), 0) + l.text)
    return "<pre><code>" + html.escape("\n".join(out), quote=False) + "</code></pre>"
