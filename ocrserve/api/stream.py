"""Incremental block splitter: raw model text in as it streams, each layout block out as soon as it closes.

The model writes top-level `<div data-label=... data-bbox=...>...</div>` blocks one after another.
`BlockSplitter.feed(text)` counts `<div` / `</div>` tags (nested divs inside a block are fine) and
returns the HTML of every top-level block whose closing tag has just arrived; `parse_block` turns one
closed block into a `Block` with the page's size, through `ocrserve.parse_output` on that block alone.
A `<div` written inside an attribute value is not handled (the model does not write one).
"""

from __future__ import annotations

import re

from ocrserve.document import Block
from ocrserve.parse import parse_output
from ocrserve.profiles import Profile

_TAG = re.compile(r"<(/?)div\b[^>]*>", re.IGNORECASE)


class BlockSplitter:
    """Splits a streamed answer into top-level blocks. Text outside any div is dropped."""

    def __init__(self) -> None:
        self._buf = ""  # text not yet scanned to a decision
        self._block = ""  # the open top-level block so far
        self._depth = 0
        self.text = ""  # everything fed

    def feed(self, text: str) -> list[str]:
        """Add streamed text; return the blocks (outer HTML) that closed with it, in order."""
        self.text += text
        self._buf += text
        out: list[str] = []
        pos = 0
        while True:
            m = _TAG.search(self._buf, pos)
            if m is None:
                break
            closing = bool(m.group(1))
            if self._depth == 0:
                if closing:  # a stray close tag outside a block: skip it
                    pos = m.end()
                    continue
                self._block = ""  # text before the block is outside any div
                self._depth = 1
                self._block = m.group(0)
            else:
                self._block += self._buf[pos : m.end()]
                self._depth += -1 if closing else 1
                if self._depth == 0:
                    out.append(self._block)
                    self._block = ""
            pos = m.end()
        rest = self._buf[pos:]
        # keep back a possible partial tag ("<di", '<div data-bbox="[1, 2') at the end; the rest is settled
        cut = rest.rfind("<")
        if cut != -1 and ">" not in rest[cut:]:
            settled, self._buf = rest[:cut], rest[cut:]
        else:
            settled, self._buf = rest, ""
        if self._depth > 0:
            self._block += settled
        return out

    @property
    def pending(self) -> str:
        """The open (unterminated) block so far, if any."""
        return (self._block + self._buf) if self._depth > 0 else ""


def parse_block(
    html: str,
    profile: Profile | str | None,
    page_size: tuple[float, float],
    *,
    page_index: int,
    block_index: int,
    unit: str = "pt",
) -> list[Block]:
    """One closed block's HTML -> its Block(s) in page coordinates, numbered from block_index."""
    page = parse_output(html, profile, page_size, index=page_index, unit=unit, truncated=False)
    blocks = []
    for i, b in enumerate(page.blocks):
        b.index = block_index + i
        blocks.append(b)
    return blocks
