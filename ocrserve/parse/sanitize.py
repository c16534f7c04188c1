"""HTML safety and math protection for model output.

Model output is untrusted: tags and attributes outside the profile's whitelist are removed, so no
`<script>`, `on...=` handler or `javascript:` URL can reach rendered HTML. Math is lifted out
before HTML parsing (`<math>` would otherwise become MathML foreign content and `a<b` a tag), kept
as raw LaTeX, and put back as placeholders the renderers substitute.
"""

from __future__ import annotations

import html as htmllib
import re
from dataclasses import dataclass, field

from selectolax.lexbor import LexborHTMLParser, LexborNode

# placeholders for math live in the Unicode private use area; the raw text is cleared of it first
_PUA = re.compile("[\ue000-\ue00f]")
MATH_OPEN, MATH_CLOSE = "\ue000", "\ue001"
MATH_REF = re.compile("\ue000(\\d+)\ue001")
_MATH_RE = re.compile(r"<math\b([^>]*)>(.*?)(?:</math\s*>|\Z)", re.IGNORECASE | re.DOTALL)
_CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")

# content of these is dropped with the tag; other disallowed tags are unwrapped (text kept)
DROP_WITH_CONTENT = {
    "script", "style", "iframe", "object", "embed", "noscript", "template", "svg", "frame",
    "frameset", "applet", "link", "meta", "base", "head", "title", "textarea", "select", "button",
    "form", "video", "audio", "source", "canvas", "xmp", "noembed", "noframes", "plaintext",
}
URL_ATTRS = {"href", "src"}
SAFE_SCHEMES = ("http:", "https:", "mailto:", "#", "/")


@dataclass
class MathStore:
    """LaTeX lifted out of the raw output, in order."""

    items: list[tuple[str, bool]] = field(default_factory=list)  # (latex, display)

    def add(self, latex: str, display: bool) -> str:
        self.items.append((latex, display))
        return f"{MATH_OPEN}{len(self.items) - 1}{MATH_CLOSE}"

    def get(self, i: int) -> tuple[str, bool] | None:
        return self.items[i] if 0 <= i < len(self.items) else None


def protect_math(raw: str, store: MathStore) -> str:
    """Replace every `<math ...>latex</math>` (also an unterminated last one) with a placeholder."""
    raw = _PUA.sub("", raw)

    def repl(m: re.Match) -> str:
        attrs = m.group(1).lower()
        display = "block" in attrs or bool(re.search(r"\bdisplay\b(?!\s*=)", attrs))
        latex = htmllib.unescape(m.group(2)).strip()
        # a stray tag the model wrapped inside the formula is not LaTeX
        latex = re.sub(r"</?(?:math|p|div|span|br)\b[^>]*>", " ", latex).strip()
        return store.add(latex, display)

    return _MATH_RE.sub(repl, raw)


def _safe_url(value: str) -> bool:
    v = re.sub(r"[\s\x00-\x20]+", "", htmllib.unescape(value)).lower()
    if ":" not in v.split("/")[0].split("?")[0].split("#")[0]:
        return True  # relative URL
    return v.startswith(SAFE_SCHEMES)


def _safe_style(value: str) -> bool:
    v = htmllib.unescape(value).lower()
    return not any(bad in v for bad in ("expression", "url(", "javascript", "@import", "behavior", "\\"))


def sanitize_node(root: LexborNode, allowed_tags: set[str], allowed_attrs: set[str]) -> None:
    """Remove, in place, every tag and attribute below `root` that the whitelist does not allow."""
    nodes = [n for n in root.traverse(include_text=False) if n is not root and n.mem_id != root.mem_id]
    for node in reversed(nodes):  # children before parents: unwrap/decompose never touch a dead node
        tag = (node.tag or "").lower()
        if node.is_comment_node or tag in ("-comment", "!doctype", "_doctype"):
            node.decompose()
            continue
        if tag.startswith("-"):
            continue
        if tag not in allowed_tags:
            if tag in DROP_WITH_CONTENT or ":" in tag:
                node.decompose()
            else:
                node.unwrap()
            continue
        attrs = node.attrs
        for name in list(node.attributes.keys()):
            value = node.attributes.get(name) or ""
            lname = name.lower()
            if (
                lname not in allowed_attrs
                or lname.startswith("on")
                or (lname in URL_ATTRS and not _safe_url(value))
                or (lname == "style" and not _safe_style(value))
                or "javascript:" in re.sub(r"\s+", "", value.lower())
            ):
                del attrs[name]


def parse_fragment(html: str) -> LexborHTMLParser:
    return LexborHTMLParser(f"<html><body>{_CONTROL.sub('', html)}</body></html>")


def math_html(store: MathStore, text: str) -> str:
    """Put math back into already-escaped HTML text as <math> elements with escaped LaTeX."""

    def repl(m: re.Match) -> str:
        item = store.get(int(m.group(1)))
        if item is None:
            return ""
        latex, display = item
        attr = ' display="block"' if display else ""
        return f"<math{attr}>{htmllib.escape(latex, quote=False)}</math>"

    return MATH_REF.sub(repl, text)
