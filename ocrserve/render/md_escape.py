"""Making model text inert in Markdown, under CommonMark, GFM and Python-Markdown alike.

The renderers differ: Python-Markdown passes raw HTML through anywhere, does not know `\\<` as an
escape, makes links of `[x](javascript:...)` and parses fenced code as plain paragraphs (no
`fenced_code` extension in its core). So:

- text: `<` that could open a tag, comment or autolink is written `&lt;`, an `&` that would read as
  an entity `&amp;`, `[` and `]` are backslash-escaped (no link, image or reference definition can
  form), so are backticks (a code span or fence would swallow what follows), a backslash that
  would escape the next character (or ends the text: markup may follow) is doubled, and `$` is
  escaped (math);
- emphasis stays literal: every `*` is backslash-escaped, and every `_` but one inside a word
  (`my_var`: CommonMark's and Python-Markdown's intraword rule keep it literal); a `~` that could
  close GFM strikethrough (any not right after whitespace) is `&#126;` (`\\~` is no escape for
  Python-Markdown, whose core has no strikethrough);
- a line of text that would start a block (`# `, `> `, `- `, `+ `, `1. `, `1) `, `---`, `===`,
  `~~~`) has its first mark escaped (escape_line_start; the renderer knows where lines begin);
- a run of text may be followed by another (an empty `<i></i>` between): a `<`, `&`, `\\` or `~`
  that ends it is escaped too;
- the model's emphasis is `**`/`*`/`~~` where CommonMark reads the delimiters as emphasis, else
  `<strong>`/`<em>`/`<del>` (resolve_emphasis);
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

# a backslash before ASCII punctuation, or at the end of a run of text (markup may follow, or a heading's end)
_ESCAPING_BACKSLASH = re.compile(r"\\(?=[!-/:-@\[-`{-~]|\s*$)")
# an entity, or a numeric one without its `;` (Python-Markdown completes `&#42` to `&#42;`)
_ENTITY_AMP = re.compile(r"&(?=#?[A-Za-z0-9]+;|#[0-9]|#[xX][0-9A-Fa-f])")
_TEXT_AMP = re.compile(r"&(?=#?[A-Za-z0-9]+;|#[0-9]|#[xX][0-9A-Fa-f]|$)")  # also ending a run
_TAG_START = re.compile(r"<(?=[A-Za-z/!?]|$)")  # at a run's end too: the next run may begin `script>`
_UNESCAPED_DOLLAR = re.compile(r"(?<!\\)((?:\\\\)*)\$")
# in LaTeX: a `<` that starts an HTML tag or an autolink in CommonMark, or raw HTML or a mail autolink in
# Python-Markdown (its `<x&>` and `<a@b>` are those too), and the bracket pairs of link syntax; a space
# after `<` changes no formula
_MATH_TAG = re.compile(
    r"<(?=[A-Za-z][A-Za-z0-9-]*[\s/>]|[A-Za-z][A-Za-z0-9.+-]*:|[/!?]"
    r"|/?[A-Za-z][^<>@ ]*(?: [^<>]*)?>|[^<> !]+@[^@<> ]+>)"
)
_MATH_LINK = re.compile(r"\](?=[(\[:])")
_BLANK_LINES = re.compile(r"\n[ \t]*(?:\n[ \t]*)+")  # a blank line would end the paragraph (or HTML block)
_STAR = re.compile(r"\*")
_UNDERSCORE = re.compile(r"(?<![^\W_])_|_(?![^\W_])")  # all but an underscore between letters/digits
_TILDE = re.compile(r"(?<!\s)~|~(?=\s*$)")  # after whitespace none closes strikethrough, but one ending a run may
# the start of a line that would open a block: ATX heading (Python-Markdown needs no space after #),
# quote, bullet, ordered item, thematic break / setext underline / table delimiter row, tilde fence
_LINE_START = re.compile(
    r"(?P<pre>[ \t]*)(?:(?P<hash>#)|(?P<gt>>)|(?P<bullet>[-+])(?=[ \t]|$|(?<=-)-)|(?P<num>\d+)(?P<delim>[.)])(?=[ \t]|$)"
    r"|(?P<eq>=)(?==*[ \t]*$)|(?P<tilde>~)|(?P<dash>[|: \t]*)-(?=[-|: \t]*$))"
)
_URL_CHARS = {
    " ": "%20",
    "\t": "%09",
    "\n": "%0A",
    "\r": "%0D",
    "(": "%28",
    ")": "%29",
    "<": "%3C",
    ">": "%3E",
    '"': "%22",
    "'": "%27",
    "\\": "%5C",
    "[": "%5B",
    "]": "%5D",
    "`": "%60",
}
# what makes markup of code under Python-Markdown's core (no fences there: the code is paragraphs):
# a tag, comment or autolink, or link syntax (`](`, `][`, `] [`, `]:` of a reference definition)
_CODE_MARKUP = re.compile(r"<(?=[A-Za-z/!?])|\][ \t]*[(\[:]")


# every character one of escape_text's rules acts on: text without any is returned as it is
_TEXT_SPECIAL = re.compile(r"[\\&$<*_~\[\]`]")


def escape_text(t: str) -> str:
    """Markdown-escape plain text so that it stays text in every renderer."""
    if _TEXT_SPECIAL.search(t) is None:  # most runs of text: no rule would change them
        return t
    return _escape_rules(t)


def _escape_rules(t: str) -> str:
    """escape_text's rules, each applied."""
    t = _ESCAPING_BACKSLASH.sub(r"\\\\", t)
    t = _TEXT_AMP.sub("&amp;", t)
    t = t.replace("$", r"\$")
    t = _TAG_START.sub("&lt;", t)
    t = _TILDE.sub("&#126;", _UNDERSCORE.sub(r"\\_", _STAR.sub(r"\\*", t)))
    return t.replace("[", r"\[").replace("]", r"\]").replace("`", r"\`")  # ``` would open a code fence


def escape_line_start(line: str) -> str:
    """A line of escaped text (escape_text) whose start would open a block (a heading, quote, list item,
    thematic break, setext underline, table delimiter row or fence) with its first mark escaped."""
    m = _LINE_START.match(line)
    if m is None:
        return line
    pre, end = m.group("pre"), m.end()
    if m.group("num") is not None:
        return f"{pre}{m.group('num')}\\{m.group('delim')}{line[end:]}"
    if m.group("dash") is not None:
        return f"{pre}{m.group('dash')}\\-{line[end:]}"
    mark = line[end - 1]
    escaped = {"=": "&#61;", "~": "&#126;"}.get(mark, "\\" + mark)
    return f"{pre}{escaped}{line[end:]}"


# where a line of text may begin (the renderer decides, once the lines are known: resolve_lines), and
# a hard line break (`<br>`) that no whitespace squeezing may eat: both never occur in parsed text
LINE_START = "\x00"
HARD_BREAK = "\x01"
_MARKS = " \t\x00\x01"
# the model's emphasis: EM_OPEN before its opening delimiter, EM_CLOSE after its closing one
# (resolve_emphasis); the delimiters and their HTML, for where the delimiters cannot work
EM_OPEN, EM_CLOSE = "\x02", "\x03"
_EM_HTML = {"**": "strong", "*": "em", "~~": "del"}
_INVISIBLE = "\x00\x01\x02\x03"


def resolve_lines(s: str, breaks: bool = True) -> str:
    """Markdown with LINE_START marks (before each run of text) and HARD_BREAK marks (ending the line
    of a `<br>`) made final: text that begins a line has its block-opening mark escaped; with breaks,
    a hard break is two trailing spaces (a `<br>` in CommonMark and Python-Markdown alike) between
    two lines of text, and nothing where it would end a paragraph or stand on a line of its own
    (without breaks, the HARD_BREAK marks stay for a later call: a list item's lines get indented)."""
    if breaks:
        s = resolve_emphasis(s)
    if LINE_START not in s and (HARD_BREAK not in s or not breaks):
        return s
    lines = s.split("\n")
    for i, line in enumerate(lines):
        if LINE_START not in line and HARD_BREAK not in line:
            continue
        text = line.replace(HARD_BREAK, "").rstrip(" \t")
        hard = line.rstrip(" \t").endswith(HARD_BREAK)
        at = text.find(LINE_START)
        if at >= 0 and not text[:at].strip(" \t"):  # only indentation before the text: it starts the line
            text = text[:at] + escape_line_start(text[at:].replace(LINE_START, ""))
        text = text.replace(LINE_START, "")
        if not breaks:
            lines[i] = text + (HARD_BREAK if hard else "")
        elif hard and text.strip() and i + 1 < len(lines) and lines[i + 1].strip(_MARKS):
            lines[i] = text + "  "
        else:
            lines[i] = text
    return re.sub(r"\n{3,}", "\n\n", "\n".join(lines))  # a `<br>` alone on its line leaves a blank one


def resolve_emphasis(s: str) -> str:
    """The model's emphasis (EM_OPEN mark EM_CLOSE) as Markdown delimiters where CommonMark reads them
    as emphasis, else as HTML tags (`<strong>`, `<em>`, `<del>`). A delimiter run opens only when the
    text right after it is not punctuation unless whitespace or punctuation precedes it (and closes
    in mirror image): `2<b>(x)</b>` as `2**(x)**` would stay asterisks. Adjacent delimiters make one run."""
    if EM_OPEN not in s:
        return s
    s = _merge_adjacent(s)
    pairs: list[tuple[int, int, str]] = []  # (opener, closer, mark)
    stack: list[tuple[int, str]] = []
    taken: set[int] = set()  # the delimiters' positions
    for i, c in enumerate(s):
        if c == EM_OPEN:
            stack.append((i, next(m for m in ("**", "~~", "*") if s.startswith(m, i + 1))))
        elif c == EM_CLOSE and stack:
            op, mark = stack.pop()
            pairs.append((op, i, mark))
            taken.update(range(op, op + len(mark) + 1), range(i - len(mark), i + 1))

    def near(i: int, step: int) -> str:  # the first character of text from i on (" " past either end)
        while 0 <= i < len(s) and (i in taken or s[i] in _INVISIBLE):
            i += step
        return s[i] if 0 <= i < len(s) else " "

    out = list(s)
    for op, cl, mark in pairs:
        n = len(mark)
        if _flanks(near(op - 1, -1), near(op + n + 1, 1)) and _flanks(near(cl + 1, 1), near(cl - n - 1, -1)):
            continue
        tag = _EM_HTML[mark]
        out[op + 1 : op + n + 1] = [f"<{tag}>"] + [""] * (n - 1)
        out[cl - n : cl] = [f"</{tag}>"] + [""] * (n - 1)
    return "".join(out).replace(EM_OPEN, "").replace(EM_CLOSE, "")


def _merge_adjacent(s: str) -> str:
    """`<b>x</b><b>y</b>` is `**xy**`: `**x****y**` would be one run of four, no emphasis at all."""
    marks: dict[int, str] = {}
    stack: list[int] = []
    drop: set[int] = set()
    for i, c in enumerate(s):
        if c == EM_OPEN:
            mark = next(m for m in ("**", "~~", "*") if s.startswith(m, i + 1))
            stack.append(i)
            marks[i] = mark
            close = i - 1  # a closer of the same mark right before: the two become one
            if close >= 0 and s[close] == EM_CLOSE and marks.get(close) == mark:
                drop.update(range(close - len(mark), close + 1), range(i, i + len(mark) + 1))
        elif c == EM_CLOSE and stack:
            marks[i] = marks[stack.pop()]
    return "".join(c for i, c in enumerate(s) if i not in drop) if drop else s


def _flanks(outside: str, inside: str) -> bool:
    """A delimiter run between these characters can open (outside before it) or close (mirror)."""

    def punct(c: str) -> bool:
        return not c.isalnum() and not c.isspace()

    return not inside.isspace() and (not punct(inside) or outside.isspace() or punct(outside))


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
