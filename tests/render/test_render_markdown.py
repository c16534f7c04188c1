"""Markdown renderer over the corpus and its specific rules."""

from __future__ import annotations

import re

import pytest

from ocrserve import parse_output, render_markdown
from ocrserve.document import Block
from ocrserve.render.markdown import HEADER_FOOTER, block_markdown
from tests.support.corpus_util import (
    contains_run,
    corpus_files,
    doc_of,
    markdown_tokens,
    parse_corpus,
    profile_for,
    text_tokens,
)


def _md(raw: str, profile: str = "chandra-1", **kw) -> str:
    return render_markdown(doc_of(parse_output(raw, profile, (612, 792))), **kw)


@pytest.mark.parametrize("keep", [False, True])
def test_every_block_text_appears_in_the_markdown(keep):
    checked = 0
    for path in corpus_files():
        page = parse_output(path.read_text(encoding="utf-8"), profile_for(path), (612, 792))
        md_tokens = markdown_tokens(render_markdown(doc_of(page), keep_headers_footers=keep))
        for b in page.blocks:
            if b.label in HEADER_FOOTER and not keep:
                continue
            tokens = text_tokens(b.text)
            assert contains_run(md_tokens, tokens), f"{path.name} block {b.index} ({b.label}): {b.text!r}"
            checked += 1
    assert checked > 80  # the corpus has ~100 blocks


def test_headers_and_footers_dropped_by_default_kept_on_request():
    doc = doc_of(parse_corpus("c1_all_labels.html"))
    default = render_markdown(doc)
    kept = render_markdown(doc, keep_headers_footers=True)
    for s in ("Journal of Applied Widgets", "Page 101"):
        assert s not in default and s in kept
    assert "Thermal Behaviour" in default


def test_headings_from_section_header_and_h_tags():
    md = render_markdown(doc_of(parse_corpus("c1_lists_headings.html")))
    for n, word in enumerate(["one", "two", "three", "four", "five"], 1):
        assert f"\n{'#' * n} Level {word}\n" in "\n" + md
    assert "\n## 4.2 Bold header without h tag\n" in md
    assert _md('<div data-label="Section-Header"><p>Plain header</p></div>') == "## Plain header\n"


def test_nested_lists():
    md = render_markdown(doc_of(parse_corpus("c1_lists_headings.html")))
    assert (
        "1. Prepare the sample\n   - clean the slide\n   - label the slide\n     1. date\n     2. operator\n"
        "2. Run the scan\n3. Record the output"
    ) in md
    # an ordered list's `start` is kept on purpose (upstream's allow-list drops it: docs/fidelity.md)
    assert "- Paragraph item\n\n7. seventh\n8. eighth" in md


def test_simple_table_as_github_table():
    md = render_markdown(doc_of(parse_corpus("c1_all_labels.html")))
    assert "| Assembly | Layers | Peak (°C) |\n|---|---|---|\n| A1 | 2 | 41.5 |" in md


def test_table_pipes_and_line_breaks_escaped_in_cells():
    md = parse_corpus("c1_tables_spans.html").blocks[3].markdown
    assert md.splitlines() == ["| Name | Pipe \\| value |", "|---|---|", "| alpha | 1 \\| 2 |", "| beta<br>gamma | 3 |"]


def test_table_without_header_row_and_ragged_rows():
    md = parse_corpus("c1_tables_spans.html").blocks[4].markdown
    assert md.splitlines() == ["| | | |", "|---|---|---|", "| no | header | row |", "| short | | |"]


def test_spans_and_nested_tables_stay_html():
    blocks = parse_corpus("c1_tables_spans.html").blocks
    spans = blocks[1].markdown
    assert spans.startswith("<table>") and spans.endswith("</table>")
    assert '<th rowspan="2">Region</th>' in spans and '<td colspan="2">not reported</td>' in spans
    assert "<caption>Sales by region and quarter</caption>" in spans
    assert "|---" not in spans
    nested = blocks[2].markdown
    assert nested.count("<table>") == 2 and "<td>4 cm</td>" in nested


def test_explicit_span_of_one_is_not_a_span():
    assert parse_corpus("c1_tables_spans.html").blocks[5].markdown.startswith("| | |\n|---|---|\n| explicit | ones |")


def test_math_inline_and_display_latex_untouched():
    blocks = parse_corpus("c1_math.html").blocks
    assert blocks[1].markdown == r"For all $x<y$ and $a < b & c > d$ we have $f(x) \le f(y)$."
    assert blocks[2].markdown == "$$\n\\begin{aligned} a &= b + c \\\\ d &< e \\end{aligned}\n$$"
    assert blocks[4].markdown == "Display inside text:\n\n$$\n\\int_0^1 x^2\\,dx = \\tfrac{1}{3}\n$$\n\nwhich is exact."


def test_dollar_inside_math_escaped_only_when_bare():
    blocks = parse_corpus("c1_math.html").blocks
    assert r"$\$2 = 40\%$" in blocks[0].markdown  # already escaped: unchanged
    assert blocks[3].markdown == "$$\n\\text{cost} = \\$3 \\times n\n$$"


def test_literal_dollar_in_text_escaped():
    blocks = parse_corpus("c1_math.html").blocks
    assert blocks[0].markdown.startswith(r"The price rose from \$5 to \$7")
    # every $ in plain text is escaped: unescaped dollars only open/close math
    plain = re.sub(r"\$[^$]+\$", "", blocks[0].markdown.replace(r"\$", ""))
    assert "$" not in plain
    assert blocks[8].markdown == r"After it: plain text with a literal \\\$ and a 100\$ bill."


def test_math_in_tables():
    md = parse_corpus("c1_math.html").blocks[6].markdown
    assert "| area | $\\pi r^2$ |" in md
    assert "| abs | $\\|x\\| < 1$ |" in md


def test_adjacent_inline_math_separated():
    md = _md('<div data-label="Text"><p><math>a</math><math>b</math></p></div>')
    assert md == "$a$ $b$\n"


def test_checkboxes_outside_and_inside_tables():
    blocks = parse_corpus("c1_checkboxes.html").blocks
    assert "Member: [x] Yes [ ] No" in blocks[1].markdown
    assert "[x] Email [ ] Post" in blocks[1].markdown
    assert "Name: Jane Doe" in blocks[1].markdown
    assert "| Newsletter | [x] |" in blocks[2].markdown and "| Offers | [ ] |" in blocks[2].markdown
    assert blocks[3].markdown == "- [x] Bring passport\n- [ ] Book hotel"
    assert "<td>[x]</td><td>[ ]</td>" in blocks[4].markdown


def test_code_blocks_fenced():
    md = render_markdown(doc_of(parse_corpus("c1_all_labels.html")))
    assert "```\nfor layer in stack:\n    layer.measure(t=30)\n```" in md
    code = parse_corpus("c1_lists_headings.html").blocks[4].markdown
    assert code == '````\nprint("a `tick` and ```fence```")\n````'


def test_links_and_inline_code():
    md = parse_corpus("c1_lists_headings.html").blocks[5].markdown
    assert md == "See [the spec](https://example.org/a%20b%28c%29) and [section 2](#sec2); inline `x = y * 2`."


def test_figure_without_crop_is_its_description():
    b = parse_corpus("c1_all_labels.html").blocks[7]
    assert b.label == "Image" and b.figure is None
    assert b.markdown == "Photograph of a stack of eight grey widgets on a test bench"


def test_figure_with_crop_links_image():
    b = parse_corpus("c1_all_labels.html").blocks[8]
    b.figure = "images/sample_p1_b8.png"
    md = block_markdown(b)
    assert md == (
        "![Line chart of temperature against layer count, rising roughly linearly](images/sample_p1_b8.png)\n\n"
        "Temperature rises with the number of layers."
    )


def test_figure_crop_without_img_tag_gets_alt_from_text():
    b = Block(
        index=0, label="Diagram", bbox=[0, 0, 1, 1], bbox_norm=[0, 0, 1, 1], html="<p>A to B</p>", figure="images/d.png"
    )
    assert block_markdown(b) == "![A to B](images/d.png)\n\nA to B"


def test_html_in_text_escaped_in_markdown():
    md = render_markdown(doc_of(parse_corpus("hostile.html")))
    assert "<script" not in md  # `\<` is no escape for Python-Markdown: `<` that opens a tag is `&lt;`
    assert "Text that mentions &lt;script>alert(27)&lt;/script> as an example." in md


def test_hostile_links_not_in_markdown():
    md = render_markdown(doc_of(parse_corpus("hostile.html")))
    assert "javascript" not in md.lower() and "vbscript" not in md.lower() and "data:" not in md
    assert "[ok link](https://example.org/ok)" in md


def test_block_markdown_reparses_html():
    page = parse_corpus("c1_math.html")
    for b in page.blocks:
        assert block_markdown(b) == b.markdown


def test_page_separator():
    a = parse_output('<div data-label="Text"><p>one</p></div>')
    b = parse_output('<div data-label="Text"><p>two</p></div>')
    assert render_markdown(doc_of(a, b)) == "one\n\ntwo\n"
    assert render_markdown(doc_of(a, b), page_separator="---") == "one\n\n---\n\ntwo\n"


def test_empty_document_renders_empty():
    assert render_markdown(doc_of(parse_output(""))) == ""
