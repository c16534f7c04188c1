"""The plain-text format (`txt`, render/text.py): the blocks' text in reading order, a blank line between
blocks, page headers and footers only when kept, the Markdown's page separator with paginate."""

from __future__ import annotations

from ocrserve import parse_output
from ocrserve.export.formats import RenderContext, get_format, render_format
from ocrserve.render import render_text
from ocrserve.render.markdown import PAGE_RULE
from tests.support.corpus_util import doc_of

RAW = (
    '<div data-label="Page-Header"><p>ACME quarterly</p></div>'
    '<div data-label="Section-Header"><h2>Results <b>2024</b></h2></div>'
    '<div data-label="Text"><p>Sales rose by <i>*12%*</i>.<br>Costs fell.</p></div>'
    '<div data-label="List-Group"><ul><li>first</li><li>second</li></ul></div>'
    '<div data-label="Page-Footer"><p>page 1</p></div>'
)


def _page(raw: str):
    return parse_output(raw, "chandra-1", (612, 792))


def _text(text: str):
    return _page(f'<div data-label="Text"><p>{text}</p></div>' if text else "")


def test_blocks_in_reading_order_without_markup_or_headers():
    txt = render_text(doc_of(_page(RAW)))
    assert txt == "Results 2024\n\nSales rose by *12%*.\nCosts fell.\n\nfirst\nsecond\n"
    kept = render_text(doc_of(_page(RAW)), keep_headers_footers=True)
    assert kept.startswith("ACME quarterly\n\nResults 2024\n\n") and kept.endswith("\n\npage 1\n")


def test_pages_run_on_or_are_separated_as_the_markdown_paginates():
    doc = doc_of(_text("one"), _text(""), _text("three"))
    assert render_text(doc) == "one\n\nthree\n"
    assert render_text(doc, paginate=True) == f"one\n\n1{PAGE_RULE}\n\n2{PAGE_RULE}\n\nthree\n"
    assert render_text(doc_of(_text(""))) == ""


def test_the_txt_record_renders_with_the_context():
    doc = doc_of(_page(RAW), _text("two"))
    fmt = get_format("txt")
    assert (fmt.suffix, fmt.media_type) == (".txt", "text/plain; charset=utf-8")
    body, media = render_format(doc, "txt", RenderContext(paginate=True, keep_headers_footers=True))
    assert media == fmt.media_type and body.decode() == render_text(doc, paginate=True, keep_headers_footers=True)
    assert body.decode().endswith(f"page 1\n\n1{PAGE_RULE}\n\ntwo\n")
