"""Text between layout divs: line breaks make no block; real loose text still does."""

from ocrserve.parse import parse_output
from ocrserve.profiles import load_profile


def test_line_breaks_between_divs_make_no_block_but_loose_text_does():
    prof = load_profile("chandra-1")
    raw = (
        '<div data-bbox="[0, 0, 10, 10]" data-label="Text"><p>a</p></div>\n \n'
        '<div data-bbox="[0, 20, 10, 30]" data-label="Text"><p>b</p></div>\nloose <b>words</b>\n'
        '<div data-bbox="[0, 40, 10, 50]" data-label="Text">c</div>'
    )
    page = parse_output(raw, prof, (612, 792))
    assert [b.text.strip() for b in page.blocks] == ["a", "b", "loose words", "c"]
    assert page.blocks[2].label == "Text" and page.blocks[2].html.strip() == "loose <b>words</b>"
