"""Markdown rendering of blocks and documents.

Headings from Section-Header and h1-h5; lists; GitHub tables when a table has no spans, HTML when it
does; `<math>` as `$...$` / `$$...$$` with the LaTeX untouched (a bare `$` inside it escaped so the
formula does not end early); a literal `$` in text escaped; checkboxes as `[x]` / `[ ]` everywhere;
figures as `![alt](images/...)`; page headers and footers left out by default; `<br>` in text as a
hard line break (two trailing spaces), in a GitHub table cell as `<br>`. Text is escaped so that it
stays the text the model wrote (md_escape): no emphasis, strikethrough, heading, list, quote or rule
the model did not write; text runs are marked where they may begin a line, and the marks resolved
once the lines of a list item or a block are known (resolve_lines). docs/markdown.md has the rules.

The converter recurses over the DOM; the parser flattens markup deeper than
sanitize.MAX_DEPTH, and a RecursionError (only possible for hand-made trees) degrades the block to
its plain text instead of failing.
"""

from __future__ import annotations

import html as htmllib
import logging
import re
from typing import TYPE_CHECKING

from selectolax.lexbor import LexborNode

from ocrserve.labels import BLOCK_TAGS, FIGURE_LABELS, HEADER_FOOTER, HEADING_TAGS, RENDER_ATTRS, RENDER_TAGS
from ocrserve.render.md_escape import (
    EM_CLOSE,
    EM_OPEN,
    HARD_BREAK,
    LINE_START,
    code_block,
    escape_line_start,
    escape_text,
    md_latex,
    md_url,
    resolve_emphasis,
    resolve_lines,
)
from ocrserve.render.md_nodes import WS as _WS
from ocrserve.render.md_nodes import checkbox as _checkbox
from ocrserve.render.md_nodes import children as _children
from ocrserve.render.md_nodes import node_text
from ocrserve.render.md_nodes import oneline as _oneline
from ocrserve.sanitize import MATH_REF, MathStore, prepare_fragment, safe_url

if TYPE_CHECKING:
    from ocrserve.document import Block, Document

log = logging.getLogger(__name__)

__all__ = ["block_markdown", "render_markdown", "escape_text", "md_latex", "node_text"]


def _math_md(store: MathStore, ref: int | str, force_display: bool = False) -> str:
    item = store.get(int(ref))
    if item is None or not item[0].strip():
        return ""
    latex, display = item
    if display or force_display:
        return f"\n\n$$\n{md_latex(latex)}\n$$\n\n"
    return f"${md_latex(latex)}$"


def _alt(node: LexborNode, store: MathStore) -> str:
    alt = _oneline(store.latex(node.attributes.get("alt") or ""))
    return alt.replace("[", "(").replace("]", ")")


class _MD:
    def __init__(self, store: MathStore, figure: str | None = None, in_code: bool = False):
        self.store = store
        self.figure = figure  # the crop, linked from the first <img> of a figure block
        self.in_code = in_code
        self.open: dict[str, int] = {}  # emphasis marks already open around the current node

    def text(self, raw: str, collapse: bool = True) -> str:
        t = _WS.sub(" ", raw) if collapse else raw
        if self.in_code:
            return self.store.latex(t)
        parts = MATH_REF.split(t)  # text, index, text, index, ...
        out: list[str] = []
        for i, part in enumerate(parts):
            if i % 2:
                m = _math_md(self.store, part)
                if m and "".join(out).endswith("$"):
                    out.append(" ")  # `$a$$b$` would read as display math
                out.append(m)
            else:
                out.append(_lead(escape_text(part)))
        return "".join(out)

    def emphasis(self, mark: str, node: LexborNode) -> str:
        if self.open.get(mark):  # <b><b>x</b></b>: one level of bold is enough
            return self.inline(node)
        self.open[mark] = 1
        try:
            return _wrap(mark, self.inline(node))
        finally:
            self.open[mark] = 0

    def inline(self, node: LexborNode) -> str:
        return "".join(self.conv(c) for c in _children(node))

    def conv(self, node: LexborNode) -> str:
        tag = (node.tag or "").lower()
        if tag == "-text":
            return self.text(node.text_content or "", collapse=not self.in_code)
        if tag.startswith("-") or not node.is_element_node:
            return ""
        if tag in HEADING_TAGS:
            inner = _heading_text(self.inline(node))
            return f"\n\n{'#' * int(tag[1])} {inner}\n\n" if inner else ""
        if tag in ("p", "div", "caption"):
            return f"\n\n{self.inline(node).strip()}\n\n"
        if tag == "br":  # a hard break in text (resolve_lines), a newline in code
            return "\n" if self.in_code else HARD_BREAK + "\n"
        if tag == "hr":
            return "\n\n---\n\n"
        if tag in ("b", "strong"):
            return self.emphasis("**", node)
        if tag in ("i", "em"):
            return self.emphasis("*", node)
        if tag in ("del", "s", "strike"):
            return self.emphasis("~~", node)
        if tag in ("sup", "sub"):
            inner = self.inline(node).strip()
            return f"<{tag}>{inner}</{tag}>" if inner else ""
        if tag == "code" and not self.in_code:
            inner = _WS.sub(" ", self.store.latex(node.text(deep=True) or ""))
            if not inner.strip():
                return ""
            ticks = "`" * (max((len(r) for r in re.findall(r"`+", inner)), default=0) + 1)
            pad = " " if inner.startswith("`") or inner.endswith("`") else ""
            return f"{ticks}{pad}{inner}{pad}{ticks}"
        if tag == "pre":
            sub = _MD(self.store, in_code=True)
            body = sub.inline(node).strip("\n")
            return f"\n\n{code_block(body)}\n\n" if body.strip() else ""
        if tag == "a":
            inner = self.inline(node).strip()
            href = node.attributes.get("href") or ""
            if href and inner and not self.in_code and safe_url(href):
                return f"[{inner}]({md_url(href)})"
            return inner
        if tag == "input":
            box = _checkbox(node)
            return (_lead(escape_text(box)) if box and not box.startswith("[") else (box or "")) + " "
        if tag == "img":
            alt = _alt(node, self.store)
            if self.figure and not self.in_code:
                fig, self.figure = self.figure, None  # only the first image links the crop
                return f"![{escape_text(alt)}]({md_url(fig)})"
            return _lead(escape_text(alt))
        if tag in ("ul", "ol"):
            return self.list(node, ordered=tag == "ol")
        if tag == "li":
            return "\n" + self.list_item("- ", node) + "\n"
        if tag == "table":
            return f"\n\n{self.table(node)}\n\n"
        return self.inline(node)

    def list_item(self, marker: str, li: LexborNode) -> str:
        body = _squeeze(self.inline(li)).strip()
        body = resolve_lines(re.sub(r"\n{2,}", "\n", body), breaks=False)  # the item's lines are known now
        pad = " " * len(marker)
        lines = body.split("\n") if body else [""]
        return marker + lines[0] + "".join("\n" + (pad + ln if ln.strip() else "") for ln in lines[1:])

    def list(self, node: LexborNode, ordered: bool) -> str:
        start = (node.attributes.get("start") or "").strip()
        n = int(start) if ordered and start.isdigit() and len(start) < 9 else 1
        items = []
        for c in _children(node):
            tag = (c.tag or "").lower()
            if tag == "li":
                items.append(self.list_item(f"{n}. " if ordered else "- ", c))
                n += 1
            elif tag in ("ul", "ol"):
                nested = self.list(c, tag == "ol").strip("\n")
                if nested:
                    items.append("\n".join("  " + ln if ln else ln for ln in nested.split("\n")))
            else:
                t = _squeeze(self.conv(c)).strip()
                if t:
                    items.append(("- " if not ordered else f"{n}. ") + resolve_lines(re.sub(r"\n+", " ", t)))
                    n += 1
        return "\n\n" + "\n".join(items) + "\n\n"

    def table(self, node: LexborNode) -> str:
        nested = node.css("table")  # includes the node itself
        spans = any(
            (c.attributes.get("colspan") or "1").strip() not in ("", "1")
            or (c.attributes.get("rowspan") or "1").strip() not in ("", "1")
            for c in node.css("td, th")
        )
        rows = node.css("tr")
        if not rows or spans or len(nested) > 1:
            return _HtmlTable(self).ser(node)
        caption = "".join(
            _squeeze(self.inline(c)).strip() + "\n\n" for c in _children(node) if (c.tag or "").lower() == "caption"
        )
        grid: list[list[str]] = []
        header_row = False
        for i, r in enumerate(rows):
            cells = [c for c in _children(r) if (c.tag or "").lower() in ("td", "th")]
            if i == 0:
                header_row = bool(cells) and all((c.tag or "").lower() == "th" for c in cells)
            grid.append([_cell(self.inline(c)) for c in cells])
        width = max((len(r) for r in grid), default=0)
        if width == 0:
            return caption.strip()
        grid = [r + [""] * (width - len(r)) for r in grid]
        if header_row:
            head, body = grid[0], grid[1:]
        else:
            head, body = [""] * width, grid
        out = ["| " + " | ".join(head) + " |", "|" + "|".join(["---"] * width) + "|"]
        out += ["| " + " | ".join(r) + " |" for r in body]
        return caption + "\n".join(out)


class _HtmlTable:
    """Tables with spans stay HTML in Markdown: structure tags and spans only; math as $...$."""

    KEEP = {"table", "thead", "tbody", "tfoot", "tr", "td", "th", "caption"}
    INLINE = {"b", "strong", "i", "em", "sup", "sub", "u", "del", "s"}

    def __init__(self, md: _MD):
        self.md = md

    def text(self, raw: str) -> str:
        t = _WS.sub(" ", raw)
        parts = MATH_REF.split(t)
        out = []
        for i, part in enumerate(parts):
            if i % 2:
                item = self.md.store.get(int(part))
                if item and item[0].strip():
                    out.append(htmllib.escape(f"${md_latex(item[0])}$", quote=False))
            else:
                out.append(htmllib.escape(part, quote=False).replace("$", r"\$"))
        return "".join(out)

    def ser(self, node: LexborNode) -> str:
        tag = (node.tag or "").lower()
        if tag == "-text":
            return self.text(node.text_content or "")
        if tag.startswith("-") or not node.is_element_node:
            return ""
        if tag == "input":
            box = _checkbox(node)
            return (htmllib.escape(box, quote=False) if box else "") + " "
        if tag == "img":
            return htmllib.escape(_alt(node, self.md.store), quote=False)
        if tag == "br":
            return "<br>"
        inner = "".join(self.ser(c) for c in _children(node))
        if tag in self.KEEP:
            attrs = "".join(
                f' {a}="{htmllib.escape(v, quote=True)}"'
                for a in ("colspan", "rowspan")
                if (v := (node.attributes.get(a) or "").strip()) and v.isdigit() and v != "1"
            )
            return f"<{tag}{attrs}>{inner.strip()}</{tag}>"
        if tag in self.INLINE:
            return f"<{tag}>{inner}</{tag}>" if inner.strip() else inner
        if tag in BLOCK_TAGS:
            return f" {inner.strip()} "
        return inner


def _wrap(mark: str, inner: str) -> str:
    s = inner.strip()
    if not s:
        return inner
    lead = " " if inner[:1].isspace() else ""
    trail = " " if inner[-1:].isspace() else ""
    return f"{lead}{EM_OPEN}{mark}{s}{mark}{EM_CLOSE}{trail}"  # delimiters or HTML: resolve_emphasis


def _lead(s: str) -> str:
    """Text marked where it may begin a line (resolve_lines escapes it there, once lines are known)."""
    body = s.lstrip(" ")
    return s[: len(s) - len(body)] + LINE_START + body if body else s


def _heading_text(s: str) -> str:
    """Heading content on one line (inline: `2. Methods` is no list there), without a leading `#` that
    would deepen the heading or a trailing one that would read as its closing sequence (Python-Markdown
    takes `## # x` for an h3 and drops trailing `#`s even without a space before them)."""
    s = _oneline(resolve_emphasis(s).replace(HARD_BREAK, " ")).replace(LINE_START, "")
    s = "\\" + s if s.startswith("#") else s  # inline content: only `#` would change the heading
    return re.sub(r"(?<!\\)((?:\\\\)*)#$", r"\1\\#", s)


def _cell(s: str) -> str:
    s = _squeeze(resolve_emphasis(s).replace(HARD_BREAK, "").replace(LINE_START, "")).strip()
    s = re.sub(r"\n+", "<br>", s)
    return s.replace("|", r"\|")


def _squeeze(s: str) -> str:
    if "\n" not in s and "  " not in s:  # nothing below can match (most inline runs): as it is
        return s
    s = re.sub(r"[ \t]+\n", "\n", s)
    if "```" not in s:
        s = re.sub(r"\n[ \t]+(?=\S)(?![-*+] |\d+\. )", "\n", s)  # indentation of list items stays
        s = re.sub(r"(?<=\S) {2,}", " ", s)
    return re.sub(r"\n{3,}", "\n\n", s)


def _plain_markdown(node: LexborNode, store: MathStore) -> str:
    lines = node_text(node, store).split("\n")
    return "\n\n".join(escape_line_start(escape_text(line)) for line in lines if line.strip())


def block_markdown(block: Block, node: LexborNode | None = None, store: MathStore | None = None) -> str:
    """Markdown of one block. Without a parsed node, the block's HTML is parsed (and sanitized) again."""
    if node is None or store is None:
        node, store = prepare_fragment(block.html or "", RENDER_TAGS, RENDER_ATTRS)
        if node is None:
            return ""
    try:
        return _block_markdown(block, node, store)
    except RecursionError:
        log.warning("block %d (%s) nests too deeply for Markdown; rendered as plain text", block.index, block.label)
        return _plain_markdown(node, store)


def _block_markdown(block: Block, node: LexborNode, store: MathStore) -> str:
    label = block.label
    if label in FIGURE_LABELS:
        md = _MD(store, figure=block.figure)
        out = resolve_lines(_squeeze(md.inline(node)).strip()).strip()
        if md.figure:  # no <img> in the block: the crop goes first
            alt = _oneline(node_text(node, store))[:200].replace("[", "(").replace("]", ")") or label
            out = f"![{escape_text(alt)}]({md_url(md.figure)})" + ("\n\n" + out if out else "")
        return out
    md = _MD(store)
    if label == "Equation-Block":
        text = node.text(deep=True) or ""
        if MATH_REF.search(text) and not MATH_REF.sub("", text).strip():
            parts = [_math_md(store, m.group(1), force_display=True).strip() for m in MATH_REF.finditer(text)]
            return "\n\n".join(p for p in parts if p)
    if label == "Code-Block" and not node.css_first("pre"):
        code = _MD(store, in_code=True)
        body = re.sub(r"\n{2,}", "\n", code.inline(node)).strip("\n")
        return code_block(body) if body.strip() else ""
    out = _squeeze(md.inline(node)).strip()
    if label == "Section-Header" and out and not out.startswith("#"):  # no <h2> in it: the block is one
        out = _oneline(resolve_emphasis(out).replace(HARD_BREAK, " "))
        if out.startswith("**") and out.endswith("**") and out.count("**") == 2 and len(out) > 4:
            out = out[2:-2].strip()  # a heading is bold already
        return "## " + _heading_text(out)
    return resolve_lines(out).strip()


PAGE_RULE = "-" * 48  # after the page number: the page separator of Chandra's and marker's --paginate


def render_markdown(
    doc: Document,
    *,
    keep_headers_footers: bool = False,
    page_separator: str = "",
    paginate: bool = False,
    images: bool = True,
) -> str:
    """Markdown of a whole document; page headers and footers only with keep_headers_footers.

    paginate: before every page but the first a line `{N}` + 48 dashes, N the page's 0-based index in
    the source (as Chandra's CLI writes it: the page count so far, for a whole document), also for a
    page with no text; else page_separator (if any) between the pages that have text.
    images=False: no `![...](images/...)` lines (a figure block keeps its description as text)."""
    pages = []
    for page in doc.pages:
        parts = [
            _without_image(b) if b.figure and not images else b.markdown
            for b in page.blocks
            if b.markdown.strip() and (keep_headers_footers or b.label not in HEADER_FOOTER)
        ]
        pages.append("\n\n".join(p for p in parts if p.strip()))
    if paginate:
        numbered = [[f"{page.index}{PAGE_RULE}"] * bool(n) + [md] for n, (page, md) in enumerate(zip(doc.pages, pages))]
        text = "\n\n".join(part for both in numbered for part in both if part.strip())
    else:
        sep = f"\n\n{page_separator}\n\n" if page_separator else "\n\n"
        text = sep.join(p for p in pages if p.strip())
    return text.strip() + "\n" if text.strip() else ""


def _without_image(block: Block) -> str:
    return block_markdown(block.model_copy(update={"figure": None}))
