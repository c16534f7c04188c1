"""Standalone HTML: every block keeps data-label and its normalized data-bbox; figures link to crops."""

from __future__ import annotations

import html as htmllib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..document import Document

_STYLE = """
body{font-family:system-ui,sans-serif;max-width:60rem;margin:2rem auto;padding:0 1rem;line-height:1.5;color:#1a1a1a}
section.page{border-bottom:1px solid #ddd;padding-bottom:1rem;margin-bottom:2rem}
.block{margin:.4rem 0}
.block[data-label=Page-Header],.block[data-label=Page-Footer]{color:#888;font-size:.85em}
table{border-collapse:collapse}td,th{border:1px solid #bbb;padding:.2rem .4rem}
figure{margin:.5rem 0}figure img{max-width:100%}
.status-failed{background:#fee;padding:.5rem}
"""


def _attr(v: str) -> str:
    return htmllib.escape(v, quote=True)


def render_html(doc: "Document", *, title: str | None = None) -> str:
    """A standalone HTML page of the document."""
    name = title or doc.source.path.rsplit("/", 1)[-1]
    out = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{htmllib.escape(name)}</title>",
        f'<meta name="generator" content="ocrserve">',
        f"<style>{_STYLE}</style></head><body>",
    ]
    for page in doc.pages:
        out.append(
            f'<section class="page status-{_attr(page.status)}" data-page="{page.index}" '
            f'data-width="{page.width:g}" data-height="{page.height:g}">'
        )
        if page.status == "failed":
            out.append(f'<p class="error">Page {page.index + 1} failed: {htmllib.escape(page.error or "")}</p>')
        for b in page.blocks:
            box = " ".join(f"{v:.4f}" for v in b.bbox_norm)
            inner = b.html
            if b.figure:
                alt = _attr(b.text or b.label)
                inner = f'<figure><img src="{_attr(b.figure)}" alt="{alt}"><figcaption>{b.html}</figcaption></figure>'
            out.append(
                f'<div class="block" data-label="{_attr(b.label)}" data-bbox="{box}" data-index="{b.index}">{inner}</div>'
            )
        out.append("</section>")
    out.append("</body></html>\n")
    return "\n".join(out)
