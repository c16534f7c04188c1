"""HTML renderer: standalone page, data-label and normalized data-bbox on every block, figures, safety."""

from __future__ import annotations

import re
from html.parser import HTMLParser

import pytest

from ocrserve import parse_output, render_html
from ocrserve.document import Block, Page
from ocrserve.profiles import CHANDRA1_TAGS
from tests.support.corpus_util import corpus_files, doc_of, parse_corpus, profile_for, unsafe_html_findings

ALLOWED = set(CHANDRA1_TAGS) | {"div", "chem"}


class _Blocks(HTMLParser):
    def __init__(self):
        super().__init__()
        self.blocks: list[dict] = []
        self.stack: list[str] = []
        self.doctype = False
        self.tags: list[str] = []

    def handle_decl(self, decl):
        self.doctype = decl.lower() == "doctype html"

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        a = dict(attrs)
        if tag == "div" and a.get("class") == "block":
            self.blocks.append(a)


def _blocks(out: str) -> _Blocks:
    p = _Blocks()
    p.feed(out)
    p.close()
    return p


@pytest.mark.parametrize("path", corpus_files(), ids=lambda p: p.name)
def test_every_block_keeps_label_and_normalized_bbox(path):
    page = parse_output(path.read_text(encoding="utf-8"), profile_for(path), (612, 792))
    out = render_html(doc_of(page))
    p = _blocks(out)
    assert p.doctype and out.rstrip().endswith("</html>")
    assert len(p.blocks) == len(page.blocks)
    for attrs, b in zip(p.blocks, page.blocks):
        assert attrs["data-label"] == b.label
        box = [float(v) for v in attrs["data-bbox"].split()]
        assert box == pytest.approx(b.bbox_norm, abs=1e-4)
        assert all(0 <= v <= 1 for v in box)
        assert int(attrs["data-index"]) == b.index
    assert unsafe_html_findings(out, ALLOWED) == []


def test_standalone_page():
    out = render_html(doc_of(parse_corpus("c1_all_labels.html"), path="/data/in/report.pdf"))
    assert out.startswith("<!DOCTYPE html>")
    assert '<meta charset="utf-8">' in out and "<title>report.pdf</title>" in out
    assert "<style>" in out and "<link" not in out and "<script" not in out  # nothing fetched or run
    p = _blocks(out)
    assert p.tags[:2] == ["html", "head"] and "body" in p.tags


def test_hostile_corpus_neutralized():
    page = parse_corpus("hostile.html")
    out = render_html(doc_of(page))
    assert unsafe_html_findings(out, ALLOWED) == []
    for n in range(1, 33):
        assert f"alert({n})" not in out.replace("&lt;script&gt;alert(23)", "").replace(
            "&lt;script&gt;alert(27)", ""
        ) or n in (16,), n
    assert '<a href="https://example.org/ok">ok link</a>' in out
    assert '<p style="color:red">Red is fine</p>' in out
    assert "Text that mentions &lt;script&gt;alert(27)&lt;/script&gt; as an example." in out


def test_math_in_attribute_cannot_break_out():
    out = render_html(doc_of(parse_corpus("hostile.html")))
    assert '<img alt="q&quot; onerror&#61;&quot;alert(16)">' in out
    assert unsafe_html_findings(out, ALLOWED) == []


def test_math_rendered_as_math_elements_with_escaped_latex():
    out = render_html(doc_of(parse_corpus("c1_math.html")))
    assert "<math>a &lt; b &amp; c &gt; d</math>" in out
    assert '<math display="block">\\int_0^1 x^2\\,dx = \\tfrac{1}{3}</math>' in out


def test_hostile_block_fields_escaped():
    """Blocks built by hand (or loaded from a tampered JSON) are sanitized again."""
    b = Block(
        index=0,
        label='X"><script>alert(1)</script>',
        bbox=[0, 0, 1, 1],
        bbox_norm=[0, 0, 1, 1],
        html='<p onclick="alert(2)">hi</p><script>alert(3)</script><a href="javascript:alert(4)">a</a>'
        '<img src="x" onerror="alert(5)"><iframe src="https://evil.example"></iframe>',
    )
    page = Page(index=0, width=1, height=1, blocks=[b], status="failed", error="<img src=x onerror=alert(6)>")
    out = render_html(doc_of(page, path='"><script>alert(7)</script>.pdf'))
    assert unsafe_html_findings(out, ALLOWED) == []
    assert "<p>hi</p>" in out and "<a>a</a>" in out


def test_figure_linked_to_its_crop():
    page = parse_corpus("c1_all_labels.html")
    fig = page.blocks[8]
    fig.figure = "images/report_p1_b8.png"
    out = render_html(doc_of(page))
    m = re.search(r'<div class="block" data-label="Figure"[^>]*>(.*?)</div>', out)
    assert m
    assert m.group(1) == (
        '<figure><img src="images/report_p1_b8.png" alt="Line chart of temperature against layer count, rising roughly '
        'linearly"><figcaption><p>Temperature rises with the number of layers.</p></figcaption></figure>'
    )


def test_figure_with_unsafe_path_not_linked():
    page = parse_corpus("c1_all_labels.html")
    page.blocks[7].figure = "javascript:alert(1)"
    out = render_html(doc_of(page))
    assert "javascript" not in out and "<figure>" not in out


def test_failed_page_shows_error():
    page = Page(index=2, width=612, height=792, status="failed", error="engine timed out after 3 attempts")
    out = render_html(doc_of(Page(index=0, width=1, height=1), page))
    assert 'class="page status-failed"' in out and "Page 2 failed: engine timed out after 3 attempts" in out


def test_javascript_url_hidden_in_math_does_not_reach_block_html():
    """Math is put back into attribute values before the URL check (reviewer's repro)."""
    import ocrserve

    raw = (
        '<div data-bbox="0 0 500 500" data-label="Text"><p><a href="<math>javascript:alert(1)</math>">click</a>'
        '<img alt="x" src="<math>jav&#x09;ascript:1</math>"></p></div>'
    )
    block = ocrserve.parse_output(raw, "chandra-1", (612, 792)).blocks[0]
    assert "javascript" not in block.html.lower() and "click" in block.html
