"""HTML safety and math protection for model output.

Model output is untrusted: tags and attributes outside the profile's whitelist are removed, so no
`<script>`, `on...=` handler or `javascript:` URL can reach rendered HTML. Math is lifted out
before HTML parsing (`<math>` would otherwise become MathML foreign content and `a<b` a tag), kept
as raw LaTeX, and put back as placeholders the renderers substitute.

Block HTML is written by our own serializer (`serialize_children`), never by the HTML parser: it
emits only whitelisted tags and attributes, escapes every text and attribute value, and puts math
back as `<math>` elements with escaped LaTeX (inside attribute values, as plain escaped LaTeX).
The tree is also flattened below MAX_DEPTH levels so that the recursive renderers stay far from
Python's recursion limit whatever the input.
"""

from __future__ import annotations

import functools
import html as htmllib
import re
from collections.abc import Callable, Iterable, Iterator, Set
from dataclasses import dataclass, field

from selectolax.lexbor import LexborHTMLParser, LexborNode

# placeholders for math live in the Unicode private use area; the raw text is cleared of it first
_PUA = re.compile("[\ue000-\ue00f]")
# and of character references to it (`&#xE000;`, `&#57345`: the HTML parser would decode them into placeholders)
_PUA_REF = re.compile(r"&#(?:[xX]0*[eE]00[0-9a-fA-F](?![0-9a-fA-F])|0*573(?:4[4-9]|5[0-9])(?![0-9]));?")
MATH_OPEN, MATH_CLOSE = "\ue000", "\ue001"
MATH_REF = re.compile("\ue000(\\d+)\ue001")
# a formula ends at </math>; an unterminated one at the next <math>, at the end of its paragraph,
# cell or block, or at the end of the text (a truncated answer)
_MATH_RE = re.compile(
    r"<math\b([^>]*)>(.*?)(?:</math\s*>|(?=<math\b|</(?:p|div|td|th|tr|li|ul|ol|table|h[1-6])\s*>|<div\b)|\Z)",
    re.IGNORECASE | re.DOTALL,
)
# tags a model sometimes leaves inside a formula, or hostile markup: never LaTeX
_MATH_JUNK = re.compile(
    r"</?(?:math|p|div|span|br|script|style|iframe|svg|img|a|object|embed|link|meta|base|form|input|"
    r"semantics|annotation(?:-xml)?|mrow|mi|mo|mn|ms|mtext|msup|msub|msubsup|mfrac|msqrt|mroot|"
    r"mover|munder|munderover|mtable|mtr|mtd|mstyle|mspace|mpadded|mphantom|menclose)\b[^>]*>",
    re.IGNORECASE,
)
_DISPLAY_ATTR = re.compile(r"\bdisplay\b\s*(?:=\s*[\"']?\s*([\w-]*))?", re.IGNORECASE)
# C0 controls except tab/newline/carriage return, DEL, lone surrogates, noncharacters
_BAD_CHARS = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\ud800-\udfff\ufffe\uffff]")

_WS = re.compile(r"[ \t\r\n\f\v]+")
MAX_DEPTH = 48  # element nesting kept below a block; deeper markup is flattened to its text

# content of these is dropped with the tag; other disallowed tags are unwrapped (text kept)
DROP_WITH_CONTENT = {
    "script",
    "style",
    "iframe",
    "object",
    "embed",
    "noscript",
    "template",
    "svg",
    "frame",
    "frameset",
    "applet",
    "link",
    "meta",
    "base",
    "head",
    "title",
    "textarea",
    "select",
    "button",
    "form",
    "video",
    "audio",
    "source",
    "canvas",
    "picture",
    "portal",
    "param",
    "track",
    "dialog",
}
URL_ATTRS = {"href", "src", "action", "formaction", "xlink:href", "background", "poster", "srcset"}
SAFE_SCHEMES = ("http:", "https:", "mailto:")
VOID_TAGS = {"br", "hr", "img", "input"}
_URL_STRIP = re.compile(r"[\x00-\x20\x7f\u00a0\u1680\u2000-\u200f\u2028\u2029\u202f\u205f\u3000\ufeff]+")
_STYLE_BAD = (
    "expression",
    "url(",
    "javascript",
    "vbscript",
    "@import",
    "behavior",
    "\\",
    "-moz-binding",
    "<",
    "image(",
    "image-set",
)


@dataclass
class MathStore:
    """LaTeX lifted out of the raw output, in order."""

    items: list[tuple[str, bool]] = field(default_factory=list)  # (latex, display)

    def add(self, latex: str, display: bool) -> str:
        self.items.append((latex, display))
        return f"{MATH_OPEN}{len(self.items) - 1}{MATH_CLOSE}"

    def get(self, i: int) -> tuple[str, bool] | None:
        return self.items[i] if 0 <= i < len(self.items) else None

    def latex(self, text: str) -> str:
        """The text with every placeholder replaced by its bare LaTeX."""
        return MATH_REF.sub(lambda m: (self.get(int(m.group(1))) or ("", False))[0], text)


def clean_text(raw: str) -> str:
    """Drop characters no document contains and no parser should see: controls, surrogates, our PUA (also
    written as a character reference)."""
    raw = _PUA.sub("", raw)
    while (cleared := _PUA_REF.sub("", raw)) != raw:  # `&#x&#xE000;E000;` leaves a reference behind
        raw = cleared
    return _BAD_CHARS.sub("", raw)


def protect_math(raw: str, store: MathStore) -> str:
    """Replace every `<math ...>latex</math>` (also an unterminated one) with a placeholder."""
    raw = clean_text(raw)

    def repl(m: re.Match) -> str:
        attrs = m.group(1)
        if attrs.rstrip().endswith("/"):  # <math/>: nothing inside
            return ""
        d = _DISPLAY_ATTR.search(attrs)
        display = d is not None and (d.group(1) is None or d.group(1).lower() in ("", "block", "true", "display", "1"))
        latex = htmllib.unescape(m.group(2))
        latex = _MATH_JUNK.sub(" ", latex)
        latex = _BAD_CHARS.sub("", latex).strip()
        if not latex:
            return ""
        return store.add(latex, display)

    return _MATH_RE.sub(repl, raw)


def safe_url(value: str) -> bool:
    """True for relative URLs and http(s)/mailto ones; browsers ignore whitespace and controls in schemes."""
    v = _URL_STRIP.sub("", htmllib.unescape(htmllib.unescape(value))).lower()
    head = re.split(r"[/?#]", v, maxsplit=1)[0]
    if ":" not in head:
        return True  # relative URL
    return v.startswith(SAFE_SCHEMES)


def safe_style(value: str) -> bool:
    v = _URL_STRIP.sub("", htmllib.unescape(value)).lower()
    return not any(bad in v for bad in _STYLE_BAD)


def attr_allowed(name: str, value: str, allowed_attrs: Set[str]) -> bool:
    lname = name.lower()
    if lname not in allowed_attrs or lname.startswith("on") or not re.fullmatch(r"[a-z][a-z0-9_-]*", lname):
        return False
    if lname in URL_ATTRS and not safe_url(value):
        return False
    if lname == "style" and not safe_style(value):
        return False
    squeezed = _URL_STRIP.sub("", htmllib.unescape(value)).lower()
    return not any(s in squeezed for s in ("javascript:", "vbscript:", "data:text/html"))


def _limit_depth(root: LexborNode, max_depth: int) -> None:
    """Replace every element at depth max_depth that still has child elements by its text."""
    too_deep: list[LexborNode] = []
    stack: list[tuple[LexborNode, int]] = [(root, 0)]
    while stack:
        node, depth = stack.pop()
        c = node.child
        while c is not None:
            if c.is_element_node:
                if depth + 1 >= max_depth:
                    g = c.child
                    while g is not None and not g.is_element_node:
                        g = g.next
                    if g is not None:
                        too_deep.append(c)
                else:
                    stack.append((c, depth + 1))
            c = c.next
    for node in too_deep:
        text = node.text(deep=True, separator=" ")
        node.replace_with(_WS.sub(" ", text))


def sanitize_node(
    root: LexborNode, allowed_tags: set[str], allowed_attrs: set[str], *, max_depth: int = MAX_DEPTH
) -> None:
    """Remove, in place, every tag and attribute below `root` that the whitelist does not allow."""
    allowed_tags = {t.lower() for t in allowed_tags} - DROP_WITH_CONTENT
    allowed_attrs = {a.lower() for a in allowed_attrs}
    nodes = [n for n in root.traverse(include_text=False) if n.mem_id != root.mem_id]
    for node in reversed(nodes):  # children before parents: unwrap/decompose never touch a dead node
        tag = (node.tag or "").lower()
        if node.is_comment_node or tag in ("-comment", "!doctype", "_doctype", "-doctype"):
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
            if not attr_allowed(name, node.attributes.get(name) or "", allowed_attrs):
                del attrs[name]
    _limit_depth(root, max_depth)


def parse_fragment(html: str) -> LexborHTMLParser:
    """Parse HTML as the body of a document (math placeholders, if any, are kept)."""
    return LexborHTMLParser(f"<html><body>{_BAD_CHARS.sub('', html)}</body></html>")


_RAW_TAG = re.compile(r"<(/?)([A-Za-z][A-Za-z0-9]*)\b[^<>]*?(/?)>")
_RAW_VOID = frozenset("br hr img input meta link area base col embed param source track wbr keygen".split())
MAX_RAW_DEPTH = 400


def limit_raw_nesting(html: str, max_depth: int = MAX_RAW_DEPTH) -> str:
    """Drop start tags (and their end tags) nested deeper than max_depth, before the HTML parser sees
    them: Lexbor's time grows with the square of the nesting depth (20,000 nested divs: over a second).
    A layout block (`<div data-label/data-bbox>`) met that deep closes everything open first, so an
    unclosed run of markup cannot swallow the blocks after it."""
    if html.count("<") <= max_depth:
        return html
    out: list[str] = []
    stack: list[str] = []
    excess = pos = 0
    changed = False
    for m in _RAW_TAG.finditer(html):
        closing, name, selfclose = m.group(1), m.group(2).lower(), m.group(3)
        if name in _RAW_VOID or selfclose:
            continue
        if not closing:
            if len(stack) >= max_depth:
                out.append(html[pos : m.start()])
                pos = m.end()
                changed = True
                if name == "div" and ("data-label" in m.group(0) or "data-bbox" in m.group(0)):
                    out.append("".join(f"</{n}>" for n in reversed(stack)))
                    stack, excess = [name], 0
                    out.append(m.group(0))
                else:
                    excess += 1
            else:
                stack.append(name)
        elif excess:
            out.append(html[pos : m.start()])
            pos = m.end()
            excess -= 1
            changed = True
        elif stack:
            stack.pop()
    if not changed:
        return html
    out.append(html[pos:])
    return "".join(out)


def fragment_source(html: str, store: MathStore) -> str:
    """The text Lexbor reads of untrusted `html` (`prepare_fragment`'s input to the HTML parser): cleaned
    (`protect_math` starts with `clean_text`), math out as placeholders (into `store`), nesting limited."""
    return limit_raw_nesting(protect_math(html, store))


def prepare_fragment(html: str, allowed_tags: set[str], allowed_attrs: set[str]) -> tuple[LexborNode | None, MathStore]:
    """Untrusted HTML -> (sanitized body node, its math). The body is None for an unparsable input."""
    store = MathStore()
    tree = parse_fragment(fragment_source(html, store))
    body = tree.body
    if body is not None:
        sanitize_node(body, allowed_tags, allowed_attrs)
    return body, store


def _math_element(store: MathStore, m: re.Match) -> str:
    item = store.get(int(m.group(1)))
    if item is None:
        return ""
    latex, display = item
    attr = ' display="block"' if display else ""
    return f"<math{attr}>{htmllib.escape(latex, quote=False)}</math>"


def math_html(store: MathStore, text: str) -> str:
    """Put math back into already-escaped HTML text as <math> elements with escaped LaTeX."""
    if MATH_OPEN not in text:
        return text
    return MATH_REF.sub(lambda m: _math_element(store, m), text)


def _escape_text(text: str, store: MathStore) -> str:
    return math_html(store, htmllib.escape(text, quote=False))


def escape_attr(value: str) -> str:
    """An attribute value for a double-quoted attribute. The `=` of `on...=` is written as a reference
    too, so that text such as `x" onerror=...` inside a value never reads like a handler to a filter."""
    return _HANDLER_LIKE.sub(r"\1&#61;", htmllib.escape(value, quote=True))


_HANDLER_LIKE = re.compile(r"(on[a-z]+\s*)=", re.IGNORECASE)


def children(node: LexborNode) -> Iterator[LexborNode]:
    c = node.child
    while c is not None:
        yield c
        c = c.next


def walk(nodes: Iterable[LexborNode], visit: Callable[[LexborNode, str], str | None], out: list[str]) -> None:
    """Depth first over `nodes` and their descendants, without recursion (HTML nests deeper than Python's
    stack). `visit(node, its lower-case tag)` appends what the node opens with to `out` and answers None
    (its children are skipped) or what closes it ("": nothing), appended to `out` after its children."""
    stack: list[tuple[LexborNode | None, str]] = [(n, "") for n in reversed(list(nodes))]
    while stack:
        cur, closing = stack.pop()
        if cur is None:
            out.append(closing)
            continue
        close = visit(cur, (cur.tag or "").lower())
        if close is None:
            continue
        if close:
            stack.append((None, close))
        stack.extend((k, "") for k in reversed(list(children(cur))))


def serialize_children(node: LexborNode, store: MathStore, allowed_tags: set[str], allowed_attrs: set[str]) -> str:
    """Safe HTML of the children of `node` (iterative: any depth)."""
    return serialize_nodes(list(children(node)), store, allowed_tags, allowed_attrs)


@functools.lru_cache(maxsize=32)
def _lowered(tags: frozenset[str], attrs: frozenset[str]) -> tuple[frozenset[str], frozenset[str]]:
    """The allow-lists in lower case, the dropped-with-content tags out (once a profile, not once a block)."""
    return frozenset(t.lower() for t in tags) - DROP_WITH_CONTENT, frozenset(a.lower() for a in attrs)


def serialize_nodes(nodes: list[LexborNode], store: MathStore, allowed_tags: set[str], allowed_attrs: set[str]) -> str:
    """Safe HTML of these nodes and their descendants: whitelisted tags and attributes only, all
    text and values escaped, math placeholders back as `<math>` (plain LaTeX inside attributes)."""
    tags_ok, attrs_ok = _lowered(frozenset(allowed_tags), frozenset(allowed_attrs))
    out: list[str] = []

    def visit(cur: LexborNode, tag: str) -> str | None:
        if tag == "-text":
            out.append(_escape_text(cur.text_content or "", store))
            return None
        if tag.startswith("-") or cur.is_comment_node or not cur.is_element_node or tag in DROP_WITH_CONTENT:
            return None
        if tag not in tags_ok or not _TAG_NAME.fullmatch(tag):
            return ""  # its content stays, the tag goes
        attrs = []
        for name, value in cur.attributes.items():
            # judge the value as it will be written: math put back first (a javascript: URL
            # could hide in a <math> placeholder)
            value = store.latex(value or "")
            if not attr_allowed(name, value, attrs_ok):
                continue
            attrs.append(f' {name.lower()}="{escape_attr(value)}"' if value else f" {name.lower()}")
        out.append(f"<{tag}{''.join(attrs)}>")
        return None if tag in VOID_TAGS else f"</{tag}>"

    walk(nodes, visit, out)
    return "".join(out)


_TAG_NAME = re.compile(r"[a-z][a-z0-9]*")
