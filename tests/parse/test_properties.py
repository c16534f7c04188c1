"""Property tests: the parser and every renderer take any string; no script survives into HTML."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ocrserve import parse_output, render_html, render_json, render_markdown
from ocrserve.document import Block, Document, Page
from ocrserve.parse import is_repetition_loop
from ocrserve.profiles import CHANDRA1_TAGS
from ocrserve.render.markdown import block_markdown
from tests.support.corpus_util import doc_of, unsafe_html_findings

ALLOWED = set(CHANDRA1_TAGS) | {"div", "chem"}

FRAGMENTS = [
    '<div data-bbox="[10, 20, 300, 400]" data-label="Text">',
    '<div data-bbox="1 2 3 4" data-label="Table">',
    '<div data-label="Section-Header">',
    '<div data-bbox="[5, 5]" data-label="Image">',
    "</div>",
    "<p>",
    "</p>",
    "<table>",
    "<tr>",
    "<td colspan=2>",
    "<td rowspan='3'>",
    "</td>",
    "</tr>",
    "</table>",
    "<ul><li>",
    "</li></ul>",
    "<math>",
    "</math>",
    '<math display="block">',
    "<math/>",
    "<b>",
    "</i>",
    "<br>",
    "<hr/>",
    "<h1>",
    "</h3>",
    '<input type="checkbox" checked>',
    '<img alt="',
    '">',
    "<pre>",
    "<code>",
    "`",
    "$",
    "$$",
    "<",
    ">",
    "&",
    "&amp;",
    "&lt;",
    "&#",
    ";",
    '"',
    "'",
    "=",
    "|",
    "\\",
    "\x00",
    "\ud800",
    "\ue000",
    "\ue0011\ue001",
    "\n",
    " ",
    "<!--",
    "-->",
    "<![CDATA[",
    "]]>",
    "<svg>",
    "<style>",
    "</style>",
    "<textarea>",
    "<plaintext>",
    "<xmp>",
    "<noscript>",
    "<template>",
    "<select><option>",
    "<table><td>",
    "<foreignObject>",
]
HOSTILE = [
    "<script>alert(1)</script>",
    "<SCRIPT SRC=//x.js>",
    "<img src=x onerror=alert(1)>",
    "<a href='javascript:alert(1)'>",
    '<a href="jav&#x09;ascript:alert(1)">',
    '<a href="&#106;avascript:alert(1)">',
    "<a href=' javascript:x'>",
    '<p style="background:url(javascript:alert(1))">',
    '<p style="x:expression(alert(1))">',
    "<svg onload=alert(1)>",
    "<iframe src=javascript:alert(1)>",
    "<body onload=alert(1)>",
    "<math><mi xlink:href=javascript:alert(1)>x</mi></math>",
    "<math><style><img src=x onerror=alert(1)></style></math>",
    '<img alt="<math>" onerror=alert(1) "</math>">',
    "<p/onmouseover=alert(1)>",
    "<details open ontoggle=alert(1)>",
    '<a href="vbscript:msgbox(1)">',
    '<a href="data:text/html,<script>alert(1)</script>">',
    "<object data=javascript:alert(1)>",
    "<form action=javascript:alert(1)><button formaction=javascript:alert(1)>",
    "<scr<script>ipt>alert(1)</script>",
    '<a href="java\nscript:alert(1)">',
    '<noscript><p title="</noscript><img src=x onerror=alert(1)>">',
    "<table><math><mtext><table><mglyph><style><img src=x onerror=alert(1)>",
    "<svg><p><style><img src=x onerror=alert(1)>",
    '<div data-label="Text" onclick=alert(1)>',
]

pieces = st.one_of(st.text(max_size=20), st.sampled_from(FRAGMENTS), st.sampled_from(HOSTILE))
raw_outputs = st.lists(pieces, max_size=30).map("".join)

FAST = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _check_page(page: Page) -> None:
    for b in page.blocks:
        assert 0 <= b.bbox_norm[0] <= b.bbox_norm[2] <= 1 and 0 <= b.bbox_norm[1] <= b.bbox_norm[3] <= 1
        assert "\ue000" not in b.html + b.markdown + b.text


@FAST
@given(raw_outputs, st.sampled_from(["chandra-1", "chandra-2"]))
def test_parser_and_renderers_accept_any_model_output(raw, profile):
    page = parse_output(raw, profile, (612, 792))
    _check_page(page)
    doc = doc_of(page)
    render_markdown(doc)
    render_markdown(doc, keep_headers_footers=True)
    render_json(doc)
    out = render_html(doc)
    assert unsafe_html_findings(out, ALLOWED) == [], raw
    is_repetition_loop(raw)


@FAST
@given(st.text(max_size=300))
def test_parser_accepts_any_text(raw):
    page = parse_output(raw)
    _check_page(page)
    assert unsafe_html_findings(render_html(doc_of(page)), ALLOWED) == []


@FAST
@given(raw_outputs, st.text(max_size=40), st.text(max_size=40))
def test_renderers_accept_any_block_fields(html, label, figure):
    """Blocks that did not come from the parser (a hand-made or tampered Document) render safely too."""
    block = Block(index=0, label=label, bbox=[0, 0, 1, 1], bbox_norm=[0, 0, 1, 1], html=html, figure=figure or None)
    block.markdown = block_markdown(block)
    page = Page(index=0, width=1, height=1, blocks=[block], error=label)
    doc = doc_of(page, path=label or "x")
    render_markdown(doc)
    out = render_html(doc, title=figure or None)
    assert unsafe_html_findings(out, ALLOWED) == [], (html, label, figure)
    Document.model_validate_json(render_json(doc))
