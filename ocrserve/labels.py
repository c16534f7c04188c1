"""The vocabulary of Chandra's output: block labels, the HTML tags and attributes the models write,
and the label groups the pipeline and the renderers act on. A leaf module: parse, render and the
engines all read it, and it imports nothing of ocrserve."""

from __future__ import annotations

CHANDRA1_LABELS = [
    "Caption",
    "Footnote",
    "Equation-Block",
    "List-Group",
    "Page-Header",
    "Page-Footer",
    "Image",
    "Section-Header",
    "Table",
    "Text",
    "Complex-Block",
    "Code-Block",
    "Form",
    "Table-Of-Contents",
    "Figure",
]
CHANDRA2_LABELS = CHANDRA1_LABELS + ["Chemical-Block", "Diagram", "Bibliography", "Blank-Page"]

CHANDRA1_TAGS = [
    "math",
    "br",
    "i",
    "b",
    "u",
    "del",
    "sup",
    "sub",
    "table",
    "tr",
    "td",
    "p",
    "th",
    "div",
    "pre",
    "h1",
    "h2",
    "h3",
    "h4",
    "h5",
    "ul",
    "ol",
    "li",
    "input",
    "a",
    "span",
    "img",
    "hr",
    "tbody",
    "small",
    "caption",
    "strong",
    "thead",
    "big",
    "code",
]
CHANDRA1_ATTRS = [
    "class",
    "colspan",
    "rowspan",
    "display",
    "checked",
    "type",
    "border",
    "value",
    "style",
    "href",
    "alt",
    "align",
]

HEADER_FOOTER = {"Page-Header", "Page-Footer"}
FIGURE_LABELS = {"Image", "Figure", "Diagram"}
HEADING_TAGS = ("h1", "h2", "h3", "h4", "h5", "h6")
BLOCK_TAGS = {
    "p",
    "div",
    *HEADING_TAGS,
    "ul",
    "ol",
    "table",
    "pre",
    "hr",
    "li",
    "caption",
    "tr",
    "thead",
    "tbody",
    "tfoot",
}
# what block_markdown(block) accepts when it parses a block's HTML again: every tag any profile allows
RENDER_TAGS = set(CHANDRA1_TAGS) | {"div", "chem", "em", "tfoot", "h6", "s", "strike", "mark"}
RENDER_ATTRS = set(CHANDRA1_ATTRS) | {"data-bbox", "data-label", "start"}
