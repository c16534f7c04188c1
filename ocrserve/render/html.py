"""Standalone HTML: every block keeps data-label and its normalized data-bbox; figures link to crops.

Block HTML is sanitized again here (whitelisted tags and attributes, escaped text), so a Document
loaded from anywhere cannot put a script, an event handler or a `javascript:` URL into the page; a
block the parser's serializer wrote in this process is written as is where that pass provably changes
nothing (render/html_reuse.py).
"""

from __future__ import annotations

import html as htmllib
import math
import re
from typing import TYPE_CHECKING

from ocrserve.render.html_reuse import reused_html
from ocrserve.render.html_reuse import safe_block_html as safe_block_html
from ocrserve.sanitize import escape_attr, safe_url

if TYPE_CHECKING:
    from ocrserve.document import Block, Document

_STYLE = """
body{font-family:system-ui,sans-serif;max-width:60rem;margin:2rem auto;padding:0 1rem;line-height:1.5;color:#1a1a1a}
section.page{border-bottom:1px solid #ddd;padding-bottom:1rem;margin-bottom:2rem}
.block{margin:.4rem 0}
.block[data-label=Page-Header],.block[data-label=Page-Footer]{color:#888;font-size:.85em}
table{border-collapse:collapse}td,th{border:1px solid #bbb;padding:.2rem .4rem}
figure{margin:.5rem 0}figure img{max-width:100%}
.status-failed{background:#fee;padding:.5rem}
"""
_IMG = re.compile(r"<img\b([^>]*)>")
_ALT = re.compile(r'\balt="([^"]*)"')


def _attr(v: object) -> str:
    return escape_attr(str(v))


def _num(v: float) -> str:
    return f"{v:.4f}" if math.isfinite(v) else "0.0000"


def _figure_html(b: Block, inner: str) -> str:
    src = _attr(b.figure or "")
    m = _IMG.search(inner)
    if m:  # the model's <img alt=...> (it never has a src) becomes the crop
        given = _ALT.search(m.group(1))
        img = f'<img src="{src}" alt="{given.group(1) if given else _attr(b.label)}">'
        return f"<figure>{img}<figcaption>{inner[: m.start()]}{inner[m.end() :]}</figcaption></figure>"
    alt = _attr((b.text or b.label)[:200])
    return f'<figure><img src="{src}" alt="{alt}"><figcaption>{inner}</figcaption></figure>'


def render_html(doc: Document, *, title: str | None = None) -> str:
    """A standalone HTML page of the document."""
    name = title or str(doc.source.path).replace("\\", "/").rsplit("/", 1)[-1]
    out = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{htmllib.escape(name)}</title>",
        '<meta name="generator" content="ocrserve">',
        f"<style>{_STYLE}</style></head><body>",
    ]
    for page in doc.pages:
        out.append(
            f'<section class="page status-{_attr(page.status)}" data-page="{int(page.index)}" '
            f'data-width="{_attr(f"{page.width:g}")}" data-height="{_attr(f"{page.height:g}")}">'
        )
        if page.status == "failed":
            out.append(f'<p class="error">Page {int(page.index) + 1} failed: {htmllib.escape(page.error or "")}</p>')
        for b in page.blocks:
            box = " ".join(_num(v) for v in b.bbox_norm)
            inner = reused_html(b)  # the parser's own output, when sanitizing it again changes nothing
            if inner is None:
                inner = safe_block_html(b.html)
            if b.figure and safe_url(b.figure):
                inner = _figure_html(b, inner)
            out.append(
                f'<div class="block" data-label="{_attr(b.label)}" data-bbox="{_attr(box)}" '
                f'data-index="{int(b.index)}">{inner}</div>'
            )
        out.append("</section>")
    out.append("</body></html>\n")
    return "\n".join(out)
