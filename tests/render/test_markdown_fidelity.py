"""Markdown that means what the model wrote (#26.5): text with Markdown syntax in it stays that text,
and no emphasis, strikethrough, heading, list, quote or rule appears that the model did not write —
rendered with CommonMark (markdown-it-py, also with GFM tables and strikethrough) and Python-Markdown;
what the model did mark up (`<b>`, `<i>`, `<del>`, `<br>`) still is."""

from __future__ import annotations

import html
import re
from html.parser import HTMLParser

import markdown as pymarkdown
import pytest
from markdown_it import MarkdownIt

from ocrserve import parse_output, render_markdown
from ocrserve.labels import HEADING_TAGS
from tests.support.corpus_util import doc_of

RENDERERS = {
    "commonmark": MarkdownIt("commonmark").render,
    "gfm": MarkdownIt("commonmark").enable(["table", "strikethrough"]).render,
    "python-markdown": pymarkdown.markdown,
    "python-markdown-tables": lambda s: pymarkdown.markdown(s, extensions=["tables"]),
}
# tags that only markup the model did not write could produce
MARKUP = {
    "em",
    "strong",
    "del",
    "s",
    *HEADING_TAGS,
    "ul",
    "ol",
    "li",
    "blockquote",
    "hr",
    "pre",
    "code",
    "a",
    "img",
    "table",
}

TRICKY = [
    "call _init_ with 2*3*4",
    "**bold?**",
    "*emphasis?* and _this_ and __that__",
    "a * b * c and a*b*c",
    "snake_case_name and my_var and __init__ and _private",
    "# not a heading",
    "#hashtag at the start",
    "## two",
    "1. not a list",
    "2024) not a list either",
    "- not a bullet",
    "+ not a bullet",
    "* not a bullet",
    "> not a quote",
    ">> nor this",
    "---",
    "- - -",
    "***",
    "___",
    "===",
    "~~~",
    "```",
    "~~struck?~~ and ~single~ and 5~6 and ~10 nm",
    "|---|---|",
    "<b>html-ish</b> &amp; &lt;i&gt; <!-- c --> <br>",
    "C# and F# and C++",
    "Section 3 #",
    "[x] not a box and [link](http://x.org) and ![img](y.png)",
    "back\\slash \\*star\\* and \\_under\\_",
    "don't, e.g., a-b, 3.5, x^2, 100%, a:b; (c) {d}",
]
# Python-Markdown's core knows no `\$` escape (nor math): there, a literal `$` reads `\$`
DOLLARS = ["costs $5 and $6", "$x$ is not math here", "US$ 3", "$$"]


class _Seen(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.text: list[str] = []
        self.tags: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        if tag == "br":
            self.text.append("\n")
        if tag == "img":
            self.text.append(dict(attrs).get("alt") or "")

    handle_startendtag = handle_starttag

    def handle_data(self, data):
        self.text.append(data)


def seen(rendered: str) -> tuple[str, list[str]]:
    """The visible text of rendered HTML (lines: `<br>` or a new block; spaces collapsed) and its tags."""
    p = _Seen()
    p.feed(re.sub(r"</(p|h[1-6]|li|blockquote|td|th|tr)>", "\n", rendered))
    p.close()
    lines = [" ".join(ln.split()) for ln in "".join(p.text).split("\n")]
    return "\n".join(ln for ln in lines if ln), p.tags


def md_of(model_html: str, label: str = "Text") -> str:
    return render_markdown(
        doc_of(parse_output(f'<div data-label="{label}">{model_html}</div>', "chandra-1", (612, 792)))
    )


def _t(s: str) -> str:
    return html.escape(s, quote=False)


def _check(md: str, expected: str, allowed: set[str], renderers=RENDERERS) -> None:
    for name, render in renderers.items():
        out = render(md)
        text, tags = seen(out)
        assert text == expected, f"{name}: {text!r} != {expected!r}\n--- markdown:\n{md}\n--- html:\n{out}"
        extra = {t for t in tags if t in MARKUP} - allowed
        assert not extra, f"{name}: {sorted(extra)} the model did not write\n--- markdown:\n{md}\n--- html:\n{out}"


@pytest.mark.parametrize("text", TRICKY)
def test_text_stays_text_in_a_paragraph(text):
    _check(md_of(f"<p>{_t(text)}</p>"), " ".join(text.split()), set())


@pytest.mark.parametrize("text", TRICKY)
def test_text_stays_text_at_the_start_of_every_line(text):
    # after a <br>, after display math, in a list item, a heading and a caption
    _check(md_of(f"<p>first<br>{_t(text)}<br>{_t(text)}</p>"), f"first\n{text}\n{text}", {"br"})
    _check(md_of(f'<p>x <math display="block">y</math>{_t(text)}</p>'), f"x\n$$\ny\n$$\n{text}", set())
    _check(
        md_of(f"<ul><li>{_t(text)}</li><li>a<br>{_t(text)}</li></ul>", "List-Group"),
        f"{text}\na\n{text}",
        {"ul", "li", "br"},
    )
    _check(md_of(f"<h2>{_t(text)}</h2>", "Section-Header"), text, {"h2"})
    _check(md_of(f"<p>{_t(text)}</p>", "Section-Header"), text, {"h2"})
    _check(md_of(f"<p><b>{_t(text)}</b></p>", "Caption"), text, {"strong"})


@pytest.mark.parametrize("text", TRICKY)
def test_text_stays_text_in_a_table_cell(text):
    md = md_of(f"<table><tr><th>h</th></tr><tr><td>{_t(text)}</td></tr></table>", "Table")
    tables = {k: v for k, v in RENDERERS.items() if k in ("gfm", "python-markdown-tables")}
    _check(md, f"h\n{' '.join(text.split())}", {"table"}, tables)


@pytest.mark.parametrize("text", DOLLARS)
def test_dollars(text):
    md = md_of(f"<p>{_t(text)}</p>")
    _check(md, text, set(), {k: v for k, v in RENDERERS.items() if k in ("commonmark", "gfm")})
    _check(md, text.replace("$", "\\$"), set(), {"python-markdown": RENDERERS["python-markdown"]})


def test_no_needless_escapes():
    plain = "don't, e.g., a-b, 3.5, 100%, x = y; my_var and snake_case_name (C# too) ~10 nm"
    assert md_of(f"<p>{_t(plain)}</p>") == plain + "\n"
    assert md_of("<p>call _init_ with 2*3*4</p>") == "call \\_init\\_ with 2\\*3\\*4\n"
    assert md_of("<p># no</p>") == "\\# no\n" and md_of("<p>a # b - c 1. d</p>") == "a # b - c 1. d\n"
    # only where a line starts: not after inline markup on the same line
    assert md_of("<p><b>Note</b> - see 1. above</p>") == "**Note** - see 1. above\n"


def test_math_code_and_urls_keep_their_characters():
    md = md_of(
        "<p>Let <math>a_b * c_{d} ~ e</math> hold; run <code>f(*args, **kw) _x_ ~y~</code> "
        'or <a href="https://x.org/a_b*c~d#e">the page</a>.</p>'
    )
    assert md == "Let $a_b * c_{d} ~ e$ hold; run `f(*args, **kw) _x_ ~y~` or [the page](https://x.org/a_b*c~d#e).\n"
    code = md_of("<pre>*a* _b_ ~~c~~\n# d\n1. e\n&gt; f</pre>", "Code-Block")
    assert code == "```\n*a* _b_ ~~c~~\n# d\n1. e\n> f\n```\n"
    display = md_of('<math display="block">x_1 * y_2 \\sim z</math>', "Equation-Block")
    assert display == "$$\nx_1 * y_2 \\sim z\n$$\n"


def test_emphasis_the_model_wrote_is_kept():
    md = md_of("<p><b>bold</b> and <i>it_alic</i> and <b><i>both</i></b> with 2*3</p>")
    assert md == "**bold** and *it_alic* and ***both*** with 2\\*3\n"
    for name, render in RENDERERS.items():
        out = render(md)
        assert "<strong>bold</strong>" in out and "<em>it_alic</em>" in out, name
        assert seen(out)[0] == "bold and it_alic and both with 2*3", name
    struck = md_of("<p><del>old</del> new</p>")
    assert "<s>old</s> new" in RENDERERS["gfm"](struck)


def test_br_is_a_hard_line_break_in_both_renderers():
    md = md_of("<p>first line<br>second line<br>third</p>")
    assert md == "first line  \nsecond line  \nthird\n"
    for name, render in RENDERERS.items():
        out = render(md)
        assert out.count("<br") == 2, f"{name}: {out}"
        assert seen(out)[0] == "first line\nsecond line\nthird", name


def test_br_at_the_end_or_doubled():
    assert md_of("<p>a<br></p><p>b</p>") == "a\n\nb\n"  # nothing to break before: no trailing spaces
    assert md_of("<p>a<br><br>b</p>") == "a\n\nb\n"  # an empty line: a new paragraph
    assert md_of("<p>a <br> b</p>") == "a  \nb\n"


def test_br_in_list_items_and_table_cells():
    md = md_of("<ul><li>one<br>two</li><li>three</li></ul>", "List-Group")
    assert md == "- one  \ntwo\n- three\n"
    for name, render in RENDERERS.items():
        out = render(md)
        assert "<br" in out and out.count("<li>") == 2, f"{name}: {out}"
    cell = md_of("<table><tr><th>h</th></tr><tr><td>a<br>b</td></tr></table>", "Table")
    assert cell == "| h |\n|---|\n| a<br>b |\n"  # a GitHub table cell is one line: `<br>` as before
    assert md_of("<h2>a<br>b</h2>", "Section-Header") == "## a b\n"


def test_heading_content_is_inline():
    assert md_of("<h2>2. Synthesis of Aspirin</h2>", "Section-Header") == "## 2. Synthesis of Aspirin\n"
    assert md_of("<p>- 3 - Results</p>", "Section-Header") == "## - 3 - Results\n"
    assert md_of("<h3># tag</h3>", "Section-Header") == "### \\# tag\n"


def test_heading_trailing_hash_kept():
    for name, render in RENDERERS.items():
        assert "<h2>Learn C#</h2>" in render(md_of("<h2>Learn C#</h2>", "Section-Header")), name
        assert "<h2>Section 3 #</h2>" in render(md_of("<p>Section 3 #</p>", "Section-Header")), name


def test_emphasis_where_delimiters_cannot_work_is_html():
    # `2**(x)**y`: a run before punctuation, after a letter, neither opens nor closes in CommonMark
    md = md_of("<p>2<b>(x)</b>y and see<i>(Fig. 3)</i>and <b>Note:</b> x</p>")
    assert md == "2<strong>(x)</strong>y and see<em>(Fig. 3)</em>and **Note:** x\n"
    for name, render in RENDERERS.items():
        assert seen(render(md))[0] == "2(x)y and see(Fig. 3)and Note: x", name
        assert render(md).count("<strong>") == 2 and render(md).count("<em>") == 1, name


def test_adjacent_emphasis_of_one_kind_merges():
    md = md_of("<p><b>Name:</b><b>Jane</b> and <i>a</i><i>b</i> and <b><i>c</i></b><b>d</b></p>")
    assert md == "**Name:Jane** and *ab* and ***c*d**\n"
    for name, render in RENDERERS.items():
        out = render(md)
        assert "<strong>Name:Jane</strong>" in out and "<em>ab</em>" in out, f"{name}: {out}"


def test_text_split_by_empty_markup_stays_text():
    # an empty <i> joins two runs of text: `<` + `script>` must not make a tag, `&` + `amp;` no entity
    for name, render in RENDERERS.items():
        out = render(md_of("<p>&lt;<i></i>script&gt;alert(1)&lt;/script&gt; and x\\<b>y</b></p>"))
        assert "<script" not in out and seen(out)[0] == "<script>alert(1)</script> and x\\y", f"{name}: {out}"
        assert "<em>" not in render(md_of("<p>a_<i></i>b_c</p>")), name
    assert md_of("<p>&amp;#42 and <del>x ~</del></p>") == "&amp;#42 and ~~x &#126;~~\n"
    assert "<s>x ~</s>" in RENDERERS["gfm"](md_of("<p><del>x ~</del></p>"))
