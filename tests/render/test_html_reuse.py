"""The HTML renderer writes a block's HTML as the parser's serializer wrote it, without sanitizing it a
second time, only where that second pass provably changes nothing (render/html_reuse.py): the output is
byte for byte the one of sanitizing every block again, and HTML from anywhere else is still sanitized."""

from __future__ import annotations

import ast
import hashlib
import pickle
from pathlib import Path
from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ocrserve import Document, parse_output, render_html
from ocrserve.document import Block, Page
from ocrserve.render import html as html_mod
from ocrserve.render.html import safe_block_html
from ocrserve.render.html_reuse import reused_html, stable, stable_together, vouch
from tests.fakes.standin_answers import chandra_output
from tests.support.corpus_util import corpus_files, doc_of, profile_for, unsafe_html_findings

TESTS = Path(__file__).resolve().parents[1]
SHARED = TESTS.parents[1] / "shared" / "chandra"


def _raw_outputs_in_tests() -> list[str]:
    """Every string constant of the test modules that holds a layout block (the tests' model answers)."""
    out = []
    for path in sorted(TESTS.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and "data-label" in node.value:
                out.append(node.value)
    return out


def _raw_outputs() -> list[tuple[str, str]]:
    raws = [(p.read_text(encoding="utf-8"), profile_for(p)) for p in corpus_files()]
    raws += [(s, prof) for s in _raw_outputs_in_tests() for prof in ("chandra-1", "chandra-2")]
    raws += [(p.read_text(encoding="utf-8"), "chandra-1") for p in sorted(SHARED.glob("*.txt"))]
    for i in range(24):  # the stand-in server's answers (what the client CPU bench parses)
        raws.append((chandra_output(hashlib.sha256(str(i).encode()).hexdigest(), 1632, 2112), "chandra-1"))
    return raws


def _fresh(doc: Document) -> Document:
    """The same document as loaded from its JSON: no block vouched for, every block sanitized again."""
    return Document.model_validate_json(doc.model_dump_json())


def _check_blocks(page: Page) -> tuple[int, int]:
    reused = 0
    for b in page.blocks:
        got = reused_html(b)
        if got is not None:
            assert got == safe_block_html(b.html), b.html
            reused += 1
    return reused, len(page.blocks)


def test_output_is_the_one_of_sanitizing_every_block_again():
    reused = total = 0
    for raw, profile in _raw_outputs():
        page = parse_output(raw, profile, (612, 792))
        r, n = _check_blocks(page)
        reused, total = reused + r, total + n
        doc = doc_of(page)
        assert render_html(doc) == render_html(_fresh(doc))
    assert total > 300 and reused >= 0.9 * total, (reused, total)  # the skip is the common case


def test_the_parsers_blocks_are_not_sanitized_again(monkeypatch):
    pages = [
        parse_output(chandra_output(hashlib.sha256(str(i).encode()).hexdigest(), 1632, 2112), "chandra-1", (612, 792))
        for i in range(6)
    ]
    doc = doc_of(*pages)
    calls: list[str] = []

    def counting(html: str) -> str:
        calls.append(html)
        return safe_block_html(html)

    monkeypatch.setattr(html_mod, "safe_block_html", counting)
    out = render_html(doc)
    assert calls == []  # was: every block
    assert out == render_html(_fresh(doc)) and len(calls) == sum(len(p.blocks) for p in pages)


# the sanitizer's output it changes when it reads it again: the parser writes what a second pass leaves as is
NOT_FIXED_POINTS = [
    "<p>a<marquee><p>b</p></marquee></p>",  # nested paragraphs once the marquee is unwrapped
    "<ul><li>a<marquee><li>b</li></marquee></li></ul>",
    "<p>a&#1;b</p>",  # a control character from a reference, dropped by the second pass
    "<p>a&#13;b</p>",  # a carriage return, read back as a line feed
    "<pre>\n\ncode</pre>",  # the parser drops a <pre>'s first line break each time
    "<p>x<script></script>\ny</p><pre><script></script>\nq</pre>",
    '<a href="x"><table><a href="y">z</a></table></a>',  # nested links the parser makes, and undoes
]


@pytest.mark.parametrize("inner", NOT_FIXED_POINTS)
def test_the_parser_writes_what_a_second_pass_leaves_as_is(inner, monkeypatch):
    """The sanitizer's first pass over these is not its fixed point: the block's HTML (the JSON's) is the
    fixed point, the one the HTML output writes, and it is reused as such."""
    import ocrserve.parse.blocks as blocks_mod

    raw = f'<div data-bbox="[0, 0, 500, 500]" data-label="Text">{inner}</div>'
    page = parse_output(raw, "chandra-1", (612, 792))
    assert page.blocks
    for b in page.blocks:
        assert safe_block_html(b.html) == b.html, b.html  # was: changed by a second pass
        assert reused_html(b) == b.html
        assert stable(b.html)
    doc = doc_of(page)
    assert render_html(doc) == render_html(_fresh(doc))
    monkeypatch.setattr(blocks_mod, "vouch_page", lambda blocks: None)  # the first pass alone is not (the case holds)
    first = [b.html for b in parse_output(raw, "chandra-1", (612, 792)).blocks]
    assert any(safe_block_html(x) != x for x in first), first


def test_a_block_that_never_settles_is_left_unmarked(monkeypatch):
    """A block whose HTML a second pass still changes after the passes allowed: no mark, sanitized by the
    renderer as before."""
    import ocrserve.render.html_reuse as reuse

    monkeypatch.setattr(reuse, "stable", lambda html: False)
    monkeypatch.setattr(reuse, "stable_together", lambda htmls: False)
    page = parse_output('<div data-label="Text"><p>a</p></div>', "chandra-1", (612, 792))
    (b,) = page.blocks
    assert reused_html(b) is None and b.html == "<p>a</p>"


def test_html_the_parser_did_not_write_is_sanitized():
    hostile = '<p onclick="alert(1)">x</p><script>alert(1)</script><a href="javascript:alert(1)">y</a>'
    built = Block(index=0, label="Text", bbox=[0, 0, 1, 1], bbox_norm=[0, 0, 1, 1], html=hostile)
    parsed = parse_output('<div data-label="Text"><p>ok</p></div>', "chandra-1", (612, 792))
    changed = parsed.blocks[0]
    assert reused_html(changed) == "<p>ok</p>"
    changed.html = hostile  # changed after the parser vouched for it
    copied = parsed.blocks[0].model_copy(update={"html": hostile})
    loaded = Block.model_validate_json(built.model_dump_json())
    for b in (built, changed, copied, loaded):
        assert reused_html(b) is None
        out = render_html(doc_of(Page(index=0, width=612, height=792, blocks=[b])))
        assert not unsafe_html_findings(
            out, {"p", "a", "div", "section", "html", "head", "body", "title", "meta", "style"}
        )
        assert "<script" not in out and "onclick" not in out and "javascript:" not in out


def test_the_mark_travels_with_the_block_but_not_into_json():
    page = parse_output('<div data-label="Text"><p>a &amp; b</p></div>', "chandra-1", (612, 792))
    b = page.blocks[0]
    assert reused_html(pickle.loads(pickle.dumps(b))) == b.html  # the render workers' pipe
    assert reused_html(b.model_copy(update={"index": 3})) == b.html  # fill_in's copies
    assert "_sanitized" not in b.model_dump_json() and Block.model_validate_json(b.model_dump_json()) == b


def test_a_profile_allowing_more_than_the_renderer_is_not_vouched_for():
    from ocrserve.profiles import load_profile

    wide = load_profile("chandra-1").model_copy(update={"allowed_tags": [*load_profile("chandra-1").allowed_tags, "q"]})
    page = parse_output('<div data-label="Text"><p>a <q>b</q></p></div>', wide, (612, 792))
    assert page.blocks[0].html == "<p>a <q>b</q></p>" and reused_html(page.blocks[0]) is None
    assert "<q>" not in render_html(doc_of(page))


# ------------------------------------------------------------------ fuzzed model output

PIECES = [
    '<div data-bbox="[10, 20, 300, 400]" data-label="Text">',
    '<div data-label="Table">',
    "</div>",
    "<p>",
    "</p>",
    "<table>",
    "<tr>",
    "<td colspan=2>",
    "</td>",
    "<th>",
    "</table>",
    "<caption>",
    "<ul><li>",
    "<li>",
    "</li></ul>",
    "<ol start=3>",
    "<math>",
    "</math>",
    '<math display="block">',
    "<b>",
    "</b>",
    "<i>",
    "<a href='x'>",
    "</a>",
    "<br>",
    "<hr>",
    "<h1>",
    "</h2>",
    '<input type="checkbox" checked>',
    "<img alt='it&#39;s \"q\" onerror=x'>",
    '<span style="color:red">',
    "<pre>",
    "<pre>\n",
    "</pre>",
    "<code>",
    "<marquee>",
    "<blink>",
    "<script>",
    "</script>",
    "<svg>",
    "<!--",
    "-->",
    "<col>",
    "<wbr>",
    "<select>",
    "<xmp>",
    "&#1;",
    "&#13;",
    "\r\n",
    "&#xE000;0&#xE001;",
    "&nbsp;",
    "\xa0",
    "&amp;lt;",
    "&",
    "<",
    ">",
    '"',
    "'",
    "=",
    "\n",
    " ",
    "<span>" * 30,
    "</span>" * 7,
]
fuzzed = st.lists(st.one_of(st.sampled_from(PIECES), st.text(max_size=8)), max_size=40).map("".join)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(fuzzed, st.sampled_from(["chandra-1", "chandra-2"]))
def test_fuzzed_output_is_the_one_of_sanitizing_every_block_again(raw, profile):
    page = parse_output(raw, profile, (612, 792))
    _check_blocks(page)
    doc = doc_of(page)
    assert render_html(doc) == render_html(_fresh(doc))


# ------------------------------------------------------------------ one parse for the page's blocks

fuzzed_page = st.lists(fuzzed.map(lambda inner: f'<div data-label="Text">{inner}</div>'), min_size=1, max_size=6).map(
    "\n".join
)


def _parse(raw: str, profile: str, vouching) -> Page:
    """parse_output with `vouching(blocks)` in place of the page's vouch."""
    import ocrserve.parse.blocks as blocks_mod

    with mock.patch.object(blocks_mod, "vouch_page", vouching):
        return parse_output(raw, profile, (612, 792))


def _first_pass(raw: str, profile: str = "chandra-1") -> list[str]:
    """The page's blocks' HTML as the serializer writes it first (no block vouched for, none made stable)."""
    return [b.html for b in _parse(raw, profile, lambda blocks: None).blocks]


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(raw=fuzzed_page, profile=st.sampled_from(["chandra-1", "chandra-2"]))
def test_one_parse_of_the_page_says_stable_only_where_each_block_is(raw, profile):
    htmls = _first_pass(raw, profile)
    if stable_together(htmls):
        assert all(stable(h) for h in htmls), htmls
    # and the page's marks and HTML are the ones of vouching block by block
    page = parse_output(raw, profile, (612, 792))
    one_by_one = _parse(raw, profile, lambda blocks: [vouch(b) for b in blocks])
    assert [(b.html, reused_html(b)) for b in page.blocks] == [(b.html, reused_html(b)) for b in one_by_one.blocks]


def test_one_parse_answers_for_the_common_page_and_not_for_a_page_with_a_non_fixed_point():
    pages = [chandra_output(hashlib.sha256(str(i).encode()).hexdigest(), 1632, 2112) for i in range(8)]
    firsts = [_first_pass(raw) for raw in pages]
    assert all(stable_together(h) for h in firsts)  # the stand-in's pages: one parse each
    for inner in NOT_FIXED_POINTS:
        bad = _first_pass(f'<div data-label="Text">{inner}</div>')
        assert not all(stable(h) for h in bad)
        assert not stable_together(firsts[0] + bad)  # the page's parse says no; each block is judged alone
    # the wrapper's own name in a block's text: judged block by block
    named = _first_pass('<div data-label="Text"><p>an &lt;ocr-block&gt; tag</p></div>')
    assert all(stable(h) for h in named) and not stable_together(named)
    # a formatting element left open (not the serializer's: it writes balanced tags) shows in the next wrapper
    assert not stable_together(["<b>a", "<p>b</p>"]) and not stable_together(["<p>a</p></span>"])
