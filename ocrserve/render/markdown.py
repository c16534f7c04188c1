"""Markdown rendering of blocks and documents.

Headings from Section-Header and h1-h5; lists; GitHub tables when a table has no spans, HTML when it
does; `<math>` as `$...$` / `$$...$$` with the LaTeX untouched; a literal `$` escaped; checkboxes as
`[x]` / `[ ]` everywhere; figures as `![alt](images/...)`; page headers and footers left out by default.
"""

from __future__ import annotations

import html as htmllib
import re
from typing import TYPE_CHECKING

from selectolax.lexbor import LexborNode

from ..parse.sanitize import MATH_REF, MathStore, parse_fragment, protect_math

if TYPE_CHECKING:
    from ..document import Block, Document

HEADER_FOOTER = {"Page-Header", "Page-Footer"}
FIGURE_LABELS = {"Image", "Figure", "Diagram"}
BLOCK_TAGS = {"p", "div", "h1", "h2", "h3", "h4", "h5", "h6", "ul", "ol", "table", "pre", "hr", "li",
              "caption", "tr", "thead", "tbody"}
_WS = re.compile(r"[ \t\r\n\f\v]+")


def _children(node: LexborNode):
    c = node.child
    while c is not None:
        yield c
        c = c.next


def _checkbox(node: LexborNode) -> str | None:
    kind = (node.attributes.get("type") or "checkbox").lower()
    if kind not in ("checkbox", "radio"):
        value = node.attributes.get("value")
        return htmllib.escape(value, quote=False) if value else None
    return "[x]" if "checked" in node.attributes else "[ ]"


def _math_md(store: MathStore, m: re.Match, force_display: bool = False) -> str:
    item = store.get(int(m.group(1)))
    if item is None:
        return ""
    latex, display = item
    if display or force_display:
        return f"\n\n$$\n{latex}\n$$\n\n"
    return f"${latex}$"


class _MD:
    def __init__(self, store: MathStore, figure: str | None = None, in_code: bool = False):
        self.store = store
        self.figure = figure
        self.in_code = in_code

    def text(self, raw: str, collapse: bool = True) -> str:
        t = _WS.sub(" ", raw) if collapse else raw
        if not self.in_code:
            t = t.replace("$", r"\$")
        return MATH_REF.sub(lambda m: _math_md(self.store, m), t)

    def inline(self, node: LexborNode) -> str:
        return "".join(self.conv(c) for c in _children(node))

    def conv(self, node: LexborNode) -> str:
        tag = (node.tag or "").lower()
        if tag == "-text":
            return self.text(node.text_content or "", collapse=not self.in_code)
        if tag.startswith("-"):
            return ""
        if tag in ("h1", "h2", "h3", "h4", "h5", "h6"):
            inner = _oneline(self.inline(node))
            return f"\n\n{'#' * int(tag[1])} {inner}\n\n" if inner else ""
        if tag == "p" or tag == "div" or tag == "caption":
            return f"\n\n{self.inline(node).strip()}\n\n"
        if tag == "br":
            return "\n"
        if tag == "hr":
            return "\n\n---\n\n"
        if tag in ("b", "strong"):
            inner = self.inline(node)
            return f"**{inner.strip()}**" if inner.strip() else inner
        if tag in ("i", "em"):
            inner = self.inline(node)
            return f"*{inner.strip()}*" if inner.strip() else inner
        if tag == "del":
            inner = self.inline(node)
            return f"~~{inner.strip()}~~" if inner.strip() else inner
        if tag in ("sup", "sub"):
            inner = self.inline(node).strip()
            return f"<{tag}>{inner}</{tag}>" if inner else ""
        if tag == "code":
            inner = node.text(deep=True) or ""
            return f"`{inner}`" if inner.strip() else ""
        if tag == "pre":
            sub = _MD(self.store, in_code=True)
            body = sub.inline(node).strip("\n")
            return f"\n\n```\n{body}\n```\n\n"
        if tag == "a":
            inner = self.inline(node).strip()
            href = node.attributes.get("href")
            return f"[{inner}]({href})" if href and inner else inner
        if tag == "input":
            return (_checkbox(node) or "") + " "
        if tag == "img":
            alt = _oneline(node.attributes.get("alt") or "").replace("]", ")").replace("[", "(")
            return f"![{alt}]({self.figure or ''})"
        if tag in ("ul", "ol"):
            return self.list(node, ordered=tag == "ol")
        if tag == "li":
            return self.list_item("- ", node)
        if tag == "table":
            return f"\n\n{self.table(node)}\n\n"
        return self.inline(node)

    def list_item(self, marker: str, li: LexborNode) -> str:
        body = _squeeze(self.inline(li)).strip()
        body = re.sub(r"\n{2,}", "\n", body)
        pad = " " * len(marker)
        lines = body.split("\n") if body else [""]
        return marker + lines[0] + "".join("\n" + (pad + ln if ln.strip() else "") for ln in lines[1:])

    def list(self, node: LexborNode, ordered: bool) -> str:
        items, n = [], int(node.attributes.get("start") or 1) if ordered and (node.attributes.get("start") or "").isdigit() else 1
        for c in _children(node):
            tag = (c.tag or "").lower()
            if tag == "li":
                items.append(self.list_item(f"{n}. " if ordered else "- ", c))
                n += 1
            elif tag in ("ul", "ol"):
                nested = self.list(c, tag == "ol").strip("\n")
                items.append("\n".join("  " + ln for ln in nested.split("\n")))
            else:
                t = self.conv(c).strip()
                if t:
                    items.append(("- " if not ordered else f"{n}. ") + t)
        return "\n\n" + "\n".join(items) + "\n\n"

    def table(self, node: LexborNode) -> str:
        rows = [r for r in node.css("tr")]
        nested = node.css("table")
        spans = any(
            (c.attributes.get("colspan") or "1").strip() not in ("", "1")
            or (c.attributes.get("rowspan") or "1").strip() not in ("", "1")
            for c in node.css("td, th")
        )
        if not rows or spans or len(nested) > 1:
            return self.html_table(node)
        grid: list[list[str]] = []
        header_row = False
        for i, r in enumerate(rows):
            cells = [c for c in _children(r) if (c.tag or "").lower() in ("td", "th")]
            if i == 0:
                header_row = bool(cells) and all((c.tag or "").lower() == "th" for c in cells)
            grid.append([_cell(self.inline(c)) for c in cells])
        width = max((len(r) for r in grid), default=0)
        if width == 0:
            return ""
        grid = [r + [""] * (width - len(r)) for r in grid]
        if header_row:
            head, body = grid[0], grid[1:]
        else:
            head, body = [""] * width, grid
        out = ["| " + " | ".join(head) + " |", "|" + "|".join(["---"] * width) + "|"]
        out += ["| " + " | ".join(r) + " |" for r in body]
        return "\n".join(out)

    def html_table(self, node: LexborNode) -> str:
        return _HTML_TABLE(self).ser(node)


class _HTML_TABLE:
    """Tables with spans stay HTML in Markdown: structure tags and spans only; math as $...$."""

    KEEP = {"table", "thead", "tbody", "tr", "td", "th", "caption"}

    def __init__(self, md: _MD):
        self.md = md

    def ser(self, node: LexborNode) -> str:
        tag = (node.tag or "").lower()
        if tag == "-text":
            t = _WS.sub(" ", node.text_content or "")
            t = htmllib.escape(t, quote=False).replace("$", r"\$")
            return MATH_REF.sub(lambda m: htmllib.escape(_math_md(self.md.store, m).strip(), quote=False), t)
        if tag.startswith("-"):
            return ""
        if tag == "input":
            return (_checkbox(node) or "") + " "
        if tag == "br":
            return "<br>"
        inner = "".join(self.ser(c) for c in _children(node))
        if tag in self.KEEP:
            attrs = "".join(
                f' {a}="{htmllib.escape(node.attributes.get(a) or "", quote=True)}"'
                for a in ("colspan", "rowspan") if node.attributes.get(a)
            )
            return f"<{tag}{attrs}>{inner.strip()}</{tag}>"
        if tag in ("b", "strong", "i", "sup", "sub", "u", "del"):
            return f"<{tag}>{inner}</{tag}>"
        return inner


def _oneline(s: str) -> str:
    return _WS.sub(" ", s).strip()


def _cell(s: str) -> str:
    s = _squeeze(s).strip().replace("\n", "<br>")
    return s.replace("|", r"\|")


def _squeeze(s: str) -> str:
    s = re.sub(r"[ \t]+\n", "\n", s)
    if "```" not in s:
        s = re.sub(r"\n[ \t]+(?=\S)(?![-*+] |\d+\. )", "\n", s)  # indentation of list items stays
        s = re.sub(r"(?<=\S) {2,}", " ", s)
    return re.sub(r"\n{3,}", "\n\n", s)


def node_text(node: LexborNode, store: MathStore) -> str:
    """Plain text of a block: words, LaTeX of its math, [x]/[ ] for checkboxes."""
    parts: list[str] = []

    def walk(n: LexborNode) -> None:
        tag = (n.tag or "").lower()
        if tag == "-text":
            parts.append(MATH_REF.sub(lambda m: " " + ((store.get(int(m.group(1))) or ("", False))[0]) + " ",
                                      n.text_content or ""))
            return
        if tag == "input":
            parts.append(" " + (_checkbox(n) or "") + " ")
            return
        if tag == "img":
            parts.append(" " + (n.attributes.get("alt") or "") + " ")
            return
        if tag in BLOCK_TAGS or tag in ("br", "td", "th"):
            parts.append("\n")
        for c in _children(n):
            walk(c)
        if tag in BLOCK_TAGS or tag in ("td", "th"):
            parts.append("\n")

    for c in _children(node):
        walk(c)
    text = "".join(parts)
    return "\n".join(_oneline(ln) for ln in text.split("\n") if ln.strip())


def block_markdown(block: "Block", node: LexborNode | None = None, store: MathStore | None = None) -> str:
    """Markdown of one block. Without a parsed node, the block's sanitized HTML is parsed again."""
    if node is None or store is None:
        store = MathStore()
        body = parse_fragment(protect_math(block.html, store)).body
        if body is None:
            return ""
        node = body
    label = block.label
    md = _MD(store, figure=block.figure)
    if label in FIGURE_LABELS:
        imgs = node.css("img")
        alt = _oneline(" ".join((i.attributes.get("alt") or "") for i in imgs))
        alt = alt.replace("]", ")").replace("[", "(")
        for i in imgs:
            i.decompose()
        rest = _squeeze(md.inline(node)).strip()
        out = f"![{alt}]({block.figure or ''})"
        return out + ("\n\n" + rest if rest else "")
    if label == "Equation-Block":
        text = node.text(deep=True) or ""
        refs = MATH_REF.findall(text)
        if refs and not MATH_REF.sub("", text).strip():
            parts = [_math_md(store, m, force_display=True).strip() for m in MATH_REF.finditer(text)]
            return "\n\n".join(p for p in parts if p)
    if label == "Code-Block" and not node.css_first("pre"):
        code = _MD(store, in_code=True)
        body = re.sub(r"\n{2,}", "\n", code.inline(node)).strip("\n")
        return f"```\n{body}\n```" if body.strip() else ""
    out = _squeeze(md.inline(node)).strip()
    if label == "Section-Header" and out and not out.startswith("#"):
        out = "## " + _oneline(out)
    return out


def render_markdown(doc: "Document", *, keep_headers_footers: bool = False, page_separator: str = "") -> str:
    """Markdown of a whole document; page headers and footers only with keep_headers_footers."""
    pages = []
    for page in doc.pages:
        parts = [
            b.markdown for b in page.blocks
            if b.markdown.strip() and (keep_headers_footers or b.label not in HEADER_FOOTER)
        ]
        pages.append("\n\n".join(parts))
    sep = f"\n\n{page_separator}\n\n" if page_separator else "\n\n"
    text = sep.join(p for p in pages if p.strip())
    return text.strip() + "\n" if text.strip() else ""
