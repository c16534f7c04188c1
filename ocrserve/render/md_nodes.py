"""The DOM helpers of the Markdown renderer, and a block's plain text (node_text)."""

from __future__ import annotations

import re

from selectolax.lexbor import LexborNode

from ocrserve.labels import BLOCK_TAGS
from ocrserve.sanitize import MATH_REF, MathStore, walk
from ocrserve.sanitize import children as children

WS = re.compile(r"[ \t\r\n\f\v]+")


def checkbox(node: LexborNode) -> str | None:
    kind = (node.attributes.get("type") or "checkbox").lower()
    if kind not in ("checkbox", "radio"):
        value = node.attributes.get("value")
        return value if value else None
    return "[x]" if "checked" in node.attributes else "[ ]"


def oneline(s: str) -> str:
    return WS.sub(" ", s).strip()


def node_text(node: LexborNode, store: MathStore) -> str:
    """Plain text of a block: words, LaTeX of its math, [x]/[ ] for checkboxes, alt text of images."""
    parts: list[str] = []

    def visit(n: LexborNode, tag: str) -> str | None:
        if tag == "-text":
            parts.append(
                MATH_REF.sub(
                    lambda m: " " + ((store.get(int(m.group(1))) or ("", False))[0]) + " ", n.text_content or ""
                )
            )
            return None
        if not n.is_element_node or tag.startswith("-"):
            return None
        if tag == "input":
            parts.append(" " + (checkbox(n) or "") + " ")
            return None
        if tag == "img":
            parts.append(" " + store.latex(n.attributes.get("alt") or "") + " ")
            return None
        if tag in BLOCK_TAGS or tag in ("br", "td", "th"):
            parts.append("\n")
        return "\n" if tag in BLOCK_TAGS or tag in ("td", "th") else ""

    walk(children(node), visit, parts)
    text = "".join(parts)
    return "\n".join(oneline(ln) for ln in text.split("\n") if ln.strip())
