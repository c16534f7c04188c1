"""The DOM helpers of the Markdown renderer, and a block's plain text (node_text)."""

from __future__ import annotations

import re

from selectolax.lexbor import LexborNode

from ocrserve.labels import BLOCK_TAGS
from ocrserve.sanitize import MATH_REF, MathStore

WS = re.compile(r"[ \t\r\n\f\v]+")


def children(node: LexborNode):
    c = node.child
    while c is not None:
        yield c
        c = c.next


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
    # iterative walk: (node, closing) where closing marks the end of a block element
    stack: list[tuple[LexborNode | None, str]] = [(c, "") for c in reversed(list(children(node)))]
    while stack:
        n, closing = stack.pop()
        if n is None:
            parts.append(closing)
            continue
        tag = (n.tag or "").lower()
        if tag == "-text":
            parts.append(
                MATH_REF.sub(
                    lambda m: " " + ((store.get(int(m.group(1))) or ("", False))[0]) + " ", n.text_content or ""
                )
            )
            continue
        if not n.is_element_node or tag.startswith("-"):
            continue
        if tag == "input":
            parts.append(" " + (checkbox(n) or "") + " ")
            continue
        if tag == "img":
            parts.append(" " + store.latex(n.attributes.get("alt") or "") + " ")
            continue
        if tag in BLOCK_TAGS or tag in ("br", "td", "th"):
            parts.append("\n")
        if tag in BLOCK_TAGS or tag in ("td", "th"):
            stack.append((None, "\n"))
        stack.extend((c, "") for c in reversed(list(children(n))))
    text = "".join(parts)
    return "\n".join(oneline(ln) for ln in text.split("\n") if ln.strip())
