"""A block's HTML written by the parser's own serializer, reused as is by the HTML renderer when
sanitizing it again would give it back unchanged (issue 28, item 5: the second sanitize was a fifth of
the client's parent-process CPU).

The parser marks a block (`vouch`) only when its HTML is the output of `serialize_children` under a
whitelist within the renderer's (RENDER_TAGS, RENDER_ATTRS); the mark holds the exact string it vouches
for, so a block whose HTML changed since, one loaded from JSON or built by other code (no mark) is
sanitized as before. Security therefore rests on the serializer (whitelisted tags and attributes only,
every text and value escaped), as the renderer's own output does.

Byte-identity with `safe_block_html` is not assumed: the sanitizer is not idempotent on all of its own
output (`&#1;` becomes a control character the second pass drops; `<p>a<marquee><p>b` leaves nested
paragraphs the HTML parser splits when it reads them again; a `<pre>` whose text starts with a line
break loses it). `vouch` marks the HTML (and `reused_html` answers it) only when the renderer's pass
provably changes nothing (`stable`); where it would change it, the block's HTML becomes what that pass writes
(sanitized again until it is stable), so the JSON's HTML and the HTML output agree:

1. no character the sanitizer's first step removes (controls, noncharacters, our private-use range);
2. every `<math>` element is exactly the one the renderer writes back for its formula;
3. the nesting limit leaves the text alone;
4. Lexbor's tree of that text, serialized by Lexbor, is the text itself in Lexbor's escaping (`_lexbor_form`).

Given the mark, (4) says the tree the renderer parses is the tree the HTML spells with its tags, no
element moved, split, added or dropped and no text changed. Its tags and attributes are the
serializer's, within the renderer's whitelist, with values the serializer checked, and its nesting is
at most MAX_DEPTH - 1 below the block (the parser flattened it below its layout div), so the sanitizer
removes nothing; serializing it writes every tag and attribute as the parser's serializer did, every
text escaped alike, and each formula back as (2) checked: the same string.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from ocrserve.labels import RENDER_ATTRS, RENDER_TAGS
from ocrserve.sanitize import (
    DROP_WITH_CONTENT,
    MathStore,
    clean_text,
    limit_raw_nesting,
    math_html,
    parse_fragment,
    prepare_fragment,
    protect_math,
    serialize_children,
)

if TYPE_CHECKING:
    from ocrserve.document import Block

_MARK = "_sanitized_html"  # a key of the block's __dict__, not a field: never in JSON, not compared by ==
_RENDER_TAGS = {t.lower() for t in RENDER_TAGS} - DROP_WITH_CONTENT
_RENDER_ATTRS = {a.lower() for a in RENDER_ATTRS}
# a tag of the serializer's up to its first attribute without a value (` checked`), which Lexbor writes `checked=""`
_EMPTY_ATTR = re.compile(r'(<[a-z][a-z0-9]*(?: [a-z][a-z0-9_-]*(?:="[^"]*")?)*? [a-z][a-z0-9_-]*)(?=[ >])')


def within_render_rules(tags: set[str], attrs: set[str]) -> bool:
    """True when a whitelist allows nothing the renderer's does not."""
    return {t.lower() for t in tags} - DROP_WITH_CONTENT <= _RENDER_TAGS and {a.lower() for a in attrs} <= _RENDER_ATTRS


def safe_block_html(html: str) -> str:
    """A block's HTML, sanitized (again) under the renderer's whitelist."""
    node, store = prepare_fragment(html or "", RENDER_TAGS, RENDER_ATTRS)
    if node is None:
        return ""
    return serialize_children(node, store, RENDER_TAGS, RENDER_ATTRS)


def vouch(block: Block, passes: int = 3) -> None:
    """Mark block.html, written by the parser's serializer under a whitelist within the renderer's (the
    caller checked it with `within_render_rules`), once sanitizing it again provably changes nothing
    (`stable`). Where it would change it (the sanitizer's few non-fixed points: nested paragraphs after an
    unwrapped tag, a <pre>'s leading line break, ...), the block's HTML becomes what the renderer would
    write, so the JSON and the HTML output say the same; a block that is still not stable after `passes`
    is left unmarked (the renderer sanitizes it)."""
    html = block.html
    for _ in range(passes):
        if not isinstance(html, str):
            return
        if stable(html):
            if html != block.html:
                block.html = html
            object.__setattr__(block, _MARK, html)
            return
        html = safe_block_html(html)


def vouch_page(blocks: list[Block], passes: int = 3) -> None:
    """`vouch` for a page's blocks, the check (4) of all of them in one parse (`stable_together`); where
    that does not hold for the page as a whole, block by block, as `vouch` does."""
    if stable_together([b.html for b in blocks]):
        for b in blocks:
            object.__setattr__(b, _MARK, b.html)
        return
    for b in blocks:
        vouch(b, passes)


_WRAP = "ocr-block"  # a custom element: no allow-list has it, so no serializer's HTML holds its name


def stable_together(htmls: list[str]) -> bool:
    """True when `stable` holds for every one of these serializer's HTMLs, shown by one Lexbor parse of all
    of them, each in its own wrapper (`<ocr-block>`, an element the HTML parser treats as any other
    phrasing one: not special, no scope boundary, not formatting), instead of one parse each (a parse's
    own cost is most of a block's; issue 28, item 5). False says nothing: the caller asks block by block.

    Why one parse answers for each: (1)-(3) are checked per HTML as in `stable`. For (4), the tree Lexbor
    builds of the wrapped HTMLs must serialize to exactly the wrappers around each HTML's own Lexbor form;
    none of the HTMLs holds the wrapper's name, so that puts every wrapper at the body's top level,
    closed by its own end tag, around a tree serializing to its HTML: the HTML's tags built the elements
    they spell and no more. Such a run of tokens leaves the parser as it found it (open elements: html,
    body; no active formatting element left open; in body), so every wrapper's content was parsed from
    the state a document's `<body>` starts in, the one `stable` parses it from, and the wrapper itself is
    not looked at by any step that could see it (scope and list-item walks pass it as they pass body's
    other non-special children). The differential test (tests/render/test_html_reuse.py) checks on
    fuzzed pages that whenever this says True, `stable` says True of each HTML."""
    if not all(isinstance(h, str) for h in htmls):
        return False
    parts: list[str] = []
    expect: list[str] = []
    for html in htmls:
        if not html:
            continue
        protected = None if _WRAP in html else _protected(html)
        if protected is None:
            return False
        parts.append(f"<{_WRAP}>{protected}</{_WRAP}>")
        expect.append(f"<{_WRAP}>{_lexbor_form(protected)}</{_WRAP}>")
    if not parts:
        return True
    body = parse_fragment("".join(parts)).body
    return body is not None and body.inner_html == "".join(expect)


def _lexbor_form(html: str) -> str:
    """The serializer's HTML as Lexbor writes the same tree: a no-break space as `&nbsp;`, `'` and the `=`
    of `on...=` in attribute values as themselves (the serializer writes `&#x27;` and `&#61;` only there:
    in text an `&` is always `&amp;`), an attribute without a value as `name=""`."""
    out = html.replace("\xa0", "&nbsp;").replace("&#x27;", "'").replace("&#61;", "=")
    while True:
        nxt = _EMPTY_ATTR.sub(r'\1=""', out)
        if nxt == out:
            return out
        out = nxt


def reused_html(block: Block) -> str | None:
    """block.html when the parser vouched for it (`vouch`: sanitizing it again provably gives it back) and it
    is unchanged since; else None."""
    html = block.html
    if block.__dict__.get(_MARK) != html or not isinstance(html, str):
        return None
    return html


def stable(html: str) -> bool:
    """True when sanitizing the serializer's `html` again provably gives it back (the module's 1-4)."""
    if not html:
        return True
    protected = _protected(html)
    if protected is None:
        return False
    body = parse_fragment(protected).body
    return body is not None and body.inner_html == _lexbor_form(protected)  # (4)


def _protected(html: str) -> str | None:
    """`html` with its math as placeholders (what Lexbor is to read of it) when the module's (1)-(3) hold, else
    None."""
    if clean_text(html) != html:  # (1)
        return None
    store = MathStore()
    protected = protect_math(html, store)
    if math_html(store, protected) != html:  # (2)
        return None
    if limit_raw_nesting(protected) != protected:  # (3)
        return None
    return protected
