"""Upstream's Markdown options (#26.6): page separators (`--paginate`, as chandra's --paginate_output) and
no image lines (`--no-images`, as its include_images=False), in render_markdown and render_format."""

from __future__ import annotations

from markdown_it import MarkdownIt

from ocrserve import parse_output, render_markdown
from ocrserve.export.formats import render_format
from ocrserve.render.markdown import PAGE_RULE
from tests.support.corpus_util import doc_of


def _page(text: str):
    return parse_output(f'<div data-label="Text"><p>{text}</p></div>' if text else "", "chandra-1", (612, 792))


def _figure_doc():
    raw = (
        '<div data-label="Text"><p>Before.</p></div>'
        '<div data-label="Image"><img alt="A bar chart of sales"></div>'
        '<div data-label="Figure"><p>Axis labels</p></div>'
    )
    page = parse_output(raw, "chandra-1", (612, 792))
    page.blocks[1].figure = "images/sample_p1_b1.png"
    page.blocks[2].figure = "images/sample_p1_b2.png"
    from ocrserve.render.markdown import block_markdown

    for b in page.blocks[1:]:
        b.markdown = block_markdown(b)
    return doc_of(page)


def test_paginate_writes_chandras_separator_between_pages():
    doc = doc_of(_page("one"), _page("two"), _page("three"))
    md = render_markdown(doc, paginate=True)
    assert PAGE_RULE == "-" * 48
    # chandra's save_merged_output: "\n\n{page_num}" + "-" * 48 + "\n\n" before every page but the first
    assert md == f"one\n\n1{PAGE_RULE}\n\ntwo\n\n2{PAGE_RULE}\n\nthree\n"
    assert render_markdown(doc) == "one\n\ntwo\n\nthree\n"


def test_paginate_keeps_empty_pages_and_source_numbers():
    doc = doc_of(_page("one"), _page(""), _page("three"))
    assert render_markdown(doc, paginate=True) == f"one\n\n1{PAGE_RULE}\n\n2{PAGE_RULE}\n\nthree\n"
    doc.pages[0].index, doc.pages[1].index, doc.pages[2].index = 4, 7, 8  # a page selection: the source's index
    assert render_markdown(doc, paginate=True) == f"one\n\n7{PAGE_RULE}\n\n8{PAGE_RULE}\n\nthree\n"


def test_separator_is_a_paragraph_not_a_heading():
    md = render_markdown(doc_of(_page("one"), _page("two")), paginate=True)
    out = MarkdownIt("commonmark").render(md)
    assert f"<p>1{PAGE_RULE}</p>" in out and "<h2>" not in out and "<hr" not in out


def test_no_images_drops_the_image_lines_keeps_the_text():
    doc = _figure_doc()
    md = render_markdown(doc)
    assert "![A bar chart of sales](images/sample_p1_b1.png)" in md and "](images/sample_p1_b2.png)" in md
    text_only = render_markdown(doc, images=False)
    assert "![" not in text_only and "images/" not in text_only
    assert text_only == "Before.\n\nA bar chart of sales\n\nAxis labels\n"


def test_render_format_passes_the_markdown_options():
    doc = _figure_doc()
    doc.pages.append(_page("next"))
    doc.pages[1].index = 1
    md, media = render_format(doc, "md", paginate=True, images=False)
    assert media.startswith("text/markdown")
    assert md.decode() == f"Before.\n\nA bar chart of sales\n\nAxis labels\n\n1{PAGE_RULE}\n\nnext\n"
    assert b"![" in render_format(doc, "md")[0]
