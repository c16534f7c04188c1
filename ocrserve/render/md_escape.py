"""Making model text inert in Markdown, under CommonMark, GFM and Python-Markdown alike.

The renderers differ: Python-Markdown passes raw HTML through anywhere, does not know `\\<` as an
escape, makes links of `[x](javascript:...)` and parses fenced code as plain paragraphs (no
`fenced_code` extension in its core). So:

- text: `<` that could open a tag, comment or autolink is written `&lt;`, an `&` that would read as
  an entity `&amp;`, `[` and `]` are backslash-escaped (no link, image or reference definition can
  form), so are backticks (a code span or fence would swallow what follows), a backslash that
  would escape the next character is doubled, and `$` is escaped (math);
- math keeps its LaTeX; only what would turn into a tag or a link outside a math renderer gets a
  space (`<img ...` -> `< img ...`, `](` -> `] (`), which math mode ignores;
- code: a fence when the code holds nothing that Python-Markdown's core (which has no fences) would
  take for a tag or a link, else `<pre><code>` with the code HTML-escaped (an HTML block, raw in all);
- URLs: only those sanitize.safe_url accepts are linked (never javascript:, vbscript: or data:), and
  characters that could end or change the destination are percent-encoded.
"""

from __future__ import annotations

import html as htmllib
import re

_ESCAPING_BACKSLASH = re.compile(r"\\(?=[!-/:-@\[-`{-~])")  # a backslash before ASCII punctuation
_ENTITY_AMP = re.compile(r"&(?=#?[A-Za-z0-9]+;)")
_TAG_START = re.compile(r"<(?=[A-Za-z/!?])")
_UNESCAPED_DOLLAR = re.compile(r"(?<!\\)((?:\\\\)*)\$")
# in LaTeX: a `<` that starts an HTML tag or an autolink, and the bracket pairs of link syntax
_MATH_TAG = re.compile(r"<(?=[A-Za-z][A-Za-z0-9-]*[\s/>]|[A-Za-z][A-Za-z0-9.+-]*:|[/!?])")
_MATH_LINK = re.compile(r"\](?=[(\[:])")
_BLANK_LINES = re.compile(r"\n[ \t]*(?:\n[ \t]*)+")  # a blank line would end the paragraph (or HTML block)
_URL_CHARS = {" ": "%20", "\t": "%09", "\n": "%0A", "\r": "%0D", "(": "%28", ")": "%29", "<": "%3C",
              ">": "%3E", '"': "%22", "'": "%27", "\\": "%5C", "[": "%5B", "]": "%5D", "`": "%60"}
# what makes markup of code under Python-Markdown's core (no fences there: the code is paragraphs):
# a tag, comment or autolink, or link syntax (`](`, `][`, `] [`, `]:` of a reference definition)
_CODE_MARKUP = re.compile(r"<(?=[A-Za-z/!?])|\][ \t]*[(\[:]")


def escape_text(t: str) -> str:
    """Markdown-escape plain text so that it stays text in every renderer."""
    t = _ESCAPING_BACKSLASH.sub(r"\\\\", t)
    t = _ENTITY_AMP.sub("&amp;", t)
    t = t.replace("$", r"\$")
    t = _TAG_START.sub("&lt;", t)
    return t.replace("[", r"\[").replace("]", r"\]").replace("`", r"\`")  # ``` would open a code fence


def md_latex(latex: str) -> str:
    """LaTeX as it goes between dollars: a bare `$` escaped (the formula must not end early), no blank
    lines (an error in math mode; in Markdown they end the formula's paragraph), and a space after a
    `<` that would open a tag and after a `]` that would close link text."""
    latex = _UNESCAPED_DOLLAR.sub(lambda m: m.group(1) + r"\$", _BLANK_LINES.sub("\n", latex))
    latex = _MATH_TAG.sub("< ", latex)
    return _MATH_LINK.sub("] ", latex)


def md_url(href: str) -> str:
    """A URL as a Markdown link destination (the caller has checked it with safe_url)."""
    u = "".join(_URL_CHARS.get(c, c) for c in href.strip())
    return _ENTITY_AMP.sub("%26", u)


def code_block(body: str) -> str:
    """A code block: fenced when that is inert everywhere, else an HTML `<pre><code>` block."""
    if _CODE_MARKUP.search(body):
        return f"<pre><code>{htmllib.escape(body, quote=False)}</code></pre>"
    longest = max((len(r) for r in re.findall(r"`{3,}", body)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}\n{body}\n{fence}"
