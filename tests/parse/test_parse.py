"""Parser: raw Chandra output -> Page of Blocks, over the corpus and edge cases."""

from __future__ import annotations

import pytest

from ocrserve import parse_output
from ocrserve.parse import canonical_label, parse_bbox
from ocrserve.profiles import CHANDRA1_LABELS, CHANDRA2_LABELS, load_profile
from tests.support.corpus_util import PAGE_SIZE, corpus_files, parse_corpus, profile_for


@pytest.mark.parametrize("path", corpus_files(), ids=lambda p: p.name)
def test_corpus_parses_with_valid_blocks(path):
    raw = path.read_text(encoding="utf-8")
    page = parse_output(raw, profile_for(path), PAGE_SIZE)
    assert [b.index for b in page.blocks] == list(range(len(page.blocks)))
    for b in page.blocks:
        x0, y0, x1, y1 = b.bbox_norm
        assert 0 <= x0 <= x1 <= 1 and 0 <= y0 <= y1 <= 1, b
        bx0, by0, bx1, by1 = b.bbox
        assert 0 <= bx0 <= bx1 <= PAGE_SIZE[0] and 0 <= by0 <= by1 <= PAGE_SIZE[1], b
        assert "\ue000" not in b.html + b.markdown + b.text  # no math placeholder leaks
    if raw.strip():
        assert page.blocks, "a non-empty answer gives at least one block"


@pytest.mark.parametrize(
    "name,profile,labels",
    [("c1_all_labels.html", "chandra-1", CHANDRA1_LABELS), ("c2_all_labels.html", "chandra-2", CHANDRA2_LABELS)],
)
def test_every_label_of_the_profile(name, profile, labels):
    page = parse_corpus(name)
    assert set(labels) <= {b.label for b in page.blocks}
    assert set(load_profile(profile).labels) == set(labels)
    assert all(b.bbox_source == "model" for b in page.blocks)


def test_blocks_in_reading_order_with_their_content():
    page = parse_corpus("c1_all_labels.html")
    assert [b.label for b in page.blocks][:4] == ["Page-Header", "Section-Header", "Text", "Equation-Block"]
    text = page.blocks[2]
    assert "forty-two" in text.text and "<b>forty-two</b>" in text.html
    assert page.blocks[3].text == r"q = -k \nabla T"
    assert page.blocks[-1].label == "Page-Footer" and page.blocks[-1].text == "Page 101"


def test_bbox_list_format_scale_1024_to_page_coordinates():
    page = parse_corpus("c1_bboxes.html", page_size=(1024.0, 2048.0))
    b = page.blocks[0]
    assert b.bbox_source == "model"
    assert b.bbox_norm == pytest.approx([10 / 1024, 20 / 1024, 500 / 1024, 80 / 1024])
    assert b.bbox == pytest.approx([10.0, 40.0, 500.0, 160.0])


def test_bbox_space_format_under_chandra1():
    b = parse_corpus("c1_bboxes.html").blocks[1]
    assert b.bbox_source == "model"
    assert b.bbox_norm == pytest.approx([10 / 1024, 90 / 1024, 500 / 1024, 140 / 1024])


def test_bbox_space_and_list_format_scale_1000():
    page = parse_corpus("c2_bboxes.html", page_size=(2000.0, 1000.0))
    space, listed, corner = page.blocks
    assert space.bbox_norm == pytest.approx([0.1, 0.2, 0.5, 0.6])
    assert space.bbox == pytest.approx([200.0, 200.0, 1000.0, 600.0])
    assert listed.bbox == space.bbox
    assert corner.bbox == pytest.approx([1800.0, 900.0, 2000.0, 1000.0])


@pytest.mark.parametrize(
    "i,source,norm",
    [
        (2, "missing", [0, 0, 1, 1]),  # no data-bbox
        (3, "missing", [0, 0, 1, 1]),  # empty
        (4, "missing", [0, 0, 1, 1]),  # not numbers
        (5, "missing", [0, 0, 1, 1]),  # three numbers
        (6, "fixed", [10 / 1024, 200 / 1024, 500 / 1024, 300 / 1024]),  # reversed
        (7, "fixed", [0, 950 / 1024, 1, 1]),  # out of range, clamped
        (8, "missing", [0, 0, 1, 1]),  # 1e999
        (9, "model", [10.5 / 1024, 20.25 / 1024, 300.75 / 1024, 400 / 1024]),
    ],
)
def test_bad_boxes_fixed_or_replaced(i, source, norm):
    b = parse_corpus("c1_bboxes.html").blocks[i]
    assert b.bbox_source == source
    assert b.bbox_norm == pytest.approx(norm)


@pytest.mark.parametrize(
    "value", [None, "", "nan nan nan nan", "[inf, 0, 1, 1]", "1,2", "x" * 10000, "[1, 2, 3, 4, 5]", "--1 2 3 4"]
)
def test_parse_bbox_never_raises(value):
    box, source = parse_bbox(value, 1000)
    assert len(box) == 4 and source in ("model", "fixed", "missing")
    assert all(0 <= v <= 1000 for v in box)


def test_unknown_and_oddly_spelled_labels():
    labels = [b.label for b in parse_corpus("c1_unknown_labels.html").blocks]
    assert labels == ["Handwriting", "Section-Header", "Page-Footer", "Stickerscript", "Text", "Text"]
    assert canonical_label("  table-of-contents ", CHANDRA1_LABELS) == "Table-Of-Contents"


def test_text_outside_divs_kept_in_order():
    page = parse_corpus("c1_outside_text.html")
    texts = [b.text for b in page.blocks]
    assert texts == [
        "Preamble text before any block.",
        "First real block.",
        "A stray paragraph between blocks with bold and x^2 .",
        "Second real block.",
        "Trailing words after the last block.",
        "Block inside a wrapper div.",
    ]
    assert [b.bbox_source for b in page.blocks] == ["missing", "model", "missing", "model", "missing", "model"]
    assert "$x^2$" in page.blocks[2].markdown


def test_truncated_answer_marks_last_block():
    page = parse_corpus("c1_truncated.html")
    assert [b.truncated for b in page.blocks] == [False, False, True]
    assert page.blocks[-1].label == "Table" and "4.3" in page.blocks[-1].text


def test_truncated_flag_from_engine_wins():
    raw = '<div data-bbox="[1, 2, 3, 4]" data-label="Text"><p>done</p></div>'
    assert not parse_output(raw).blocks[-1].truncated
    assert parse_output(raw, truncated=True).blocks[-1].truncated
    assert not parse_output(raw + '<div data-label="Text"><p>cut', truncated=False).blocks[-1].truncated


@pytest.mark.parametrize("tail", ["<", "</", "<td", '<td colspan="2', "</t"])
def test_half_written_tag_at_the_cut_is_dropped(tail):
    raw = '<div data-label="Table"><table><tr><td>a</td><td>b</td></tr>' + tail
    page = parse_output(raw)
    assert page.blocks[-1].truncated
    assert page.blocks[-1].text == "a\nb"


def test_repetition_loop_output_still_parses():
    page = parse_corpus("c1_repetition.html")
    assert [b.label for b in page.blocks] == ["Text", "Table"]
    assert page.blocks[-1].truncated
    assert page.blocks[-1].markdown.startswith("| A | B | C |")


def test_empty_and_whitespace_answers():
    for raw in ("", "   \n\t ", None):
        page = parse_output(raw, "chandra-1", (100, 100))
        assert page.blocks == []


def test_garbage_keeps_legible_text():
    page = parse_corpus("c1_garbage.html")
    assert any("Some legible words survive the noise" in b.text for b in page.blocks)


def test_math_lifted_out_untouched():
    page = parse_corpus("c1_math.html")
    b = page.blocks[1]
    assert b.text == "For all x<y and a < b & c > d we have f(x) \\le f(y) ."
    assert "<math>x&lt;y</math>" in b.html and "<math>a &lt; b &amp; c &gt; d</math>" in b.html
    assert '<math display="block">' in page.blocks[2].html
    assert page.blocks[7].text == r"Unclosed \alpha + \beta"  # an unterminated formula ends with its paragraph
    assert page.blocks[8].text.startswith("After it")  # ... and does not swallow the next block


def test_math_inside_attribute_becomes_plain_text():
    page = parse_output('<div data-label="Image"><img alt="Plot of <math>y=x^2</math>"></div>')
    b = page.blocks[0]
    assert 'alt="Plot of y=x^2"' in b.html
    assert b.text == "Plot of y=x^2"


def test_empty_and_nested_math():
    page = parse_output(
        '<div data-label="Text"><p>a <math></math> b <math> </math> c <math><math>x</math></math></p></div>'
    )
    b = page.blocks[0]
    assert b.text == "a b c x"
    assert b.markdown == "a b c $x$"


def test_nul_surrogates_and_controls_removed():
    page = parse_output('<div data-label="Text"><p>a\x00b\ud800c\x07d\ue000e</p></div>')
    assert page.blocks[0].text == "abcde"
    page.blocks[0].model_dump_json()  # encodable


def test_lone_angle_brackets_are_text():
    page = parse_output('a < b and c > d <div data-label="Text"><p>1 < 2</p></div><')
    assert [b.text for b in page.blocks] == ["a < b and c > d", "1 < 2"]


def test_unclosed_tags_closed():
    page = parse_output('<div data-label="Text"><p><b>bold <i>both')
    b = page.blocks[0]
    assert b.html == "<p><b>bold <i>both</i></b></p>"
    assert b.markdown == "**bold *both***"


def test_deep_nesting_does_not_crash():
    page = parse_corpus("c1_deep_nesting.html")
    assert [b.text for b in page.blocks] == ["deep text at the bottom", "unclosed formatting"]
    assert "deep text at the bottom" in page.blocks[0].markdown
    assert page.blocks[1].markdown == "***unclosed formatting***"


def test_deeply_nested_lists_and_tables():
    raw = '<div data-label="List-Group">' + "<ul><li>item" * 3000 + "</div>"
    raw += '<div data-label="Table">' + "<table><tr><td>cell" * 2000 + "</div>"
    page = parse_output(raw)
    assert page.blocks[0].text.split("\n")[:3] == ["item"] * 3
    assert "cell" in page.blocks[1].markdown


def test_huge_answer_parses():
    para = "<p>" + "Lorem ipsum dolor sit amet, consectetur adipiscing elit. " * 20 + "</p>"
    raw = "".join(
        f'<div data-bbox="[10, {i}, 900, {i + 5}]" data-label="Text">{para}<math>x_{i} < y</math></div>\n'
        for i in range(180)
    )
    assert len(raw) > 200_000
    page = parse_output(raw)
    assert len(page.blocks) == 180
    assert page.blocks[-1].text.endswith("x_179 < y")


def test_page_size_edge_cases():
    raw = '<div data-bbox="[0, 0, 512, 512]" data-label="Text"><p>x</p></div>'
    for size in [(0, 0), (-5, 10), (float("nan"), float("inf")), None, ("a", "b")]:
        page = parse_output(raw, "chandra-1", page_size=size)  # type: ignore[arg-type]
        assert page.width > 0 and page.height > 0
        assert page.blocks[0].bbox_norm == pytest.approx([0, 0, 0.5, 0.5])


def test_unit_and_index():
    page = parse_output('<div data-label="Text"><p>x</p></div>', "chandra-2", (800, 600), index=4, unit="px")
    assert (page.index, page.unit, page.width, page.height) == (4, "px", 800, 600)


def test_pathological_nesting_depth_bounded_and_next_block_kept():
    raw = '<div data-label="Text">' + "<div>" * 40000 + "deep" + "</div>" * 40000 + "</div>"
    raw += '<div data-label="List-Group">' + "<ul><li>item" * 3000
    raw += '<div data-label="Text"><p>after</p></div>'
    page = parse_output(raw)
    assert [b.label for b in page.blocks] == ["Text", "List-Group", "Text"]
    assert page.blocks[0].text == "deep" and page.blocks[2].text == "after"


def test_an_ordered_lists_start_is_kept_on_purpose():
    """Upstream's allow-list drops `start`: exercises 150-151 would read 1-2 (docs/fidelity.md)."""
    from ocrserve.render.markdown import block_markdown

    raw = '<div data-bbox="10 10 900 200" data-label="List-Group"><ol start="150"><li>One</li><li>Two</li></ol></div>'
    (block,) = parse_output(raw, load_profile("chandra-2"), (1000, 1000)).blocks
    assert 'start="150"' in block.html
    assert block_markdown(block).strip().splitlines() == ["150. One", "151. Two"]


@pytest.mark.parametrize(
    "ref", ["&#xE000;0&#xE001;", "&#57344;0&#57345;", "&#x0e000;0&#xe001", "&#x&#xE000;E000;0&#xE001;", "&#xE00F;"]
)
def test_a_character_reference_to_the_math_placeholders_is_no_formula(ref):
    """Text that spells our math placeholders (U+E000-U+E00F) as character references: the HTML parser
    would decode them into a placeholder, and the block would show a copy of its first formula."""
    page = parse_output(f'<div data-label="Text"><p>a {ref} b <math>x^2</math></p></div>')
    b = page.blocks[0]
    assert b.html.count("<math>") == 1 and b.markdown.count("$x^2$") == 1
    assert not any("\ue000" <= ch <= "\ue00f" for ch in b.html + b.markdown + b.text)
    # references next to the range are characters as before
    text = parse_output('<div data-label="Text"><p>&#x1F600; &#xE0001; &#xE010; &#57360;</p></div>').blocks[0].text
    assert text.split() == ["\U0001f600", "\U000e0001", "\ue010", "\ue010"]
