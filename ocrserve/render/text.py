"""Document -> plain text (the `txt` output format): each block's text in reading order, blocks
separated by a blank line, no markup.

Page headers and footers are left out unless keep_headers_footers (as in the Markdown). Within a
block, blank lines are dropped, so a blank line always means the next block. paginate: before every
page but the first the Markdown's separator line, `{N}` + 48 dashes (N the page's 0-based index in
the source), also for a page with no text.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ocrserve.labels import HEADER_FOOTER
from ocrserve.render.markdown import PAGE_RULE

if TYPE_CHECKING:
    from ocrserve.document import Block, Document


def block_text(block: Block) -> str:
    """A block's text: its lines without trailing spaces, no blank line inside."""
    return "\n".join(line.rstrip() for line in (block.text or "").splitlines() if line.strip())


def render_text(doc: Document, *, keep_headers_footers: bool = False, paginate: bool = False) -> str:
    """The document's text, blocks separated by blank lines (see the module's doc)."""
    pages = []
    for page in doc.pages:
        texts = (block_text(b) for b in page.blocks if keep_headers_footers or b.label not in HEADER_FOOTER)
        pages.append("\n\n".join(t for t in texts if t))
    if paginate:
        parts = [
            part
            for n, (page, text) in enumerate(zip(doc.pages, pages))
            for part in [f"{page.index}{PAGE_RULE}"] * bool(n) + [text]
            if part
        ]
    else:
        parts = [p for p in pages if p]
    text = "\n\n".join(parts)
    return text + "\n" if text else ""
