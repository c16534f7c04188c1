"""olmOCR-Bench test types on hand-made cases, with near misses on both sides of each threshold."""

from __future__ import annotations

import pytest

from ocrserve.eval.normalize import normalize_text
from ocrserve.eval.repeats import trailing_repeats
from ocrserve.eval.tests import extract_formulas, parse_test
from tests.support.cases import maps_as


def mk(**kw):
    base = {"pdf": "a.pdf", "page": 1, "id": "t"}
    base.update(kw)
    return parse_test(base)


# ------------------------------------------------------------------------------ normalization


# text -> what the tests compare
NORMALIZED = {
    "a<br>b<br/>c": "a b c",
    "**bold** and __also__": "bold and also",
    "<b>x</b> <i>y</i>": "x y",
    "*it* and _it_": "it and it",
    "snake_case_name": "snakecasename",
    "a \n\t  b": "a b",
    "\u201cq\u201d \u2018s\u2019 \u2013 \u2014 \u2212 \u00b5": "\"q\" 's' - - - \u03bc",
    "e\u0301": "\u00e9",
}

test_normalize = maps_as(normalize_text, NORMALIZED)


# ------------------------------------------------------------------------------ present / absent


def test_present_exact_and_missing():
    t = mk(type="present", text="Hello world")
    assert t.run("# Title\n\nSay **Hello**   world!").passed is True
    assert t.run("Say Hello word, and more text here").passed is False


def test_present_threshold_both_sides():
    # text of 20 chars, max_diffs=1 -> threshold 0.95
    text = "abcdefghijklmnopqrst"
    t = mk(type="present", text=text, max_diffs=1)
    one_sub = "xx abcdefghijXlmnopqrst yy"  # 1 substitution: ratio 0.95 >= 0.95
    two_sub = "xx abcdefghijXlmnopqrsX yy"  # 2 substitutions: ratio 0.90 < 0.95
    assert t.run(one_sub).passed is True
    assert t.run(two_sub).passed is False
    strict = mk(type="present", text=text)  # max_diffs=0 -> exact
    assert strict.run(one_sub).passed is False
    assert strict.run("zz" + text + "zz").passed is True


def test_absent_threshold_both_sides():
    text = "abcdefghijklmnopqrst"
    t = mk(type="absent", text=text, max_diffs=1)
    assert t.run("xx abcdefghijXlmnopqrst yy").passed is False  # close enough to count as present
    assert t.run("xx abcdefghijXlmnopqrsX yy").passed is True  # two edits away: absent


def test_case_sensitivity():
    t = mk(type="present", text="Master Bath", case_sensitive=False)
    assert t.run("MASTER BATH").passed is True
    assert mk(type="present", text="Master Bath").run("MASTER BATH").passed is False
    a = mk(type="absent", text="Downloaded from", case_sensitive=False)
    assert a.run("DOWNLOADED FROM site").passed is False
    assert mk(type="absent", text="Downloaded from").run("DOWNLOADED FROM site").passed is True


def test_first_n_last_n():
    page = "Header 17\n" + "body text " * 20 + "\nfooter 199"
    assert mk(type="absent", text="199", last_n=20).run(page).passed is False
    assert mk(type="absent", text="17", last_n=20).run(page).passed is True
    assert mk(type="absent", text="17", first_n=20).run(page).passed is False
    both = mk(type="absent", text="Header", first_n=3, last_n=3)
    assert both.run(page).passed is True  # only "Hea" + "199" are looked at


def test_short_candidate_guard():
    # partial_ratio alone would match the single space; the length guard prevents it
    p = mk(type="present", text="a long phrase")
    assert p.run("\n").passed is False
    assert mk(type="absent", text="a long phrase").run("\n").passed is True
    # exactly len - max_diffs characters is long enough to be judged
    p2 = mk(type="present", text="abcd", max_diffs=1)
    assert p2.run("abc").passed is True


def test_found_is_reported():
    out = mk(type="present", text="quick brown fox").run("the quick brawn fox jumps")
    assert out.passed is False and "brawn" in (out.found or "")


# ------------------------------------------------------------------------------ order


def test_order_basic():
    t = mk(type="order", before="first part", after="second part")
    assert t.run("first part ... second part").passed is True
    assert t.run("second part ... first part").passed is False
    assert t.run("first part only").passed is False


def test_order_any_pair_counts():
    t = mk(type="order", before="alpha", after="omega")
    assert t.run("omega alpha omega").passed is True


def test_order_max_diffs_both_sides():
    t = mk(type="order", before="abcdefghij", after="klmnopqrst", max_diffs=1)
    assert t.run("abcdeXghij then klmnopqrst").passed is True  # 1 edit: found
    assert t.run("abXdeXghij then klmnopqrst").passed is False  # 2 edits: not found


def test_order_rejects_large_max_diffs():
    with pytest.raises(ValueError):
        mk(type="order", before="abcd", after="efghijkl", max_diffs=3)


# ------------------------------------------------------------------------------ table

MD_TABLE = """Intro

| Name | Q1 | Q2 |
|------|----|----|
| Apples | 10 | 20 |
| Pears | 30 | 40 |

after
"""

HTML_TABLE = """<table>
<thead><tr><th rowspan="2">Item</th><th colspan="2">Year Ended</th></tr>
<tr><th>2023</th><th>2024</th></tr></thead>
<tbody><tr><td>Revenue</td><td>1,136</td><td>2,000</td></tr>
<tr><td>Cost</td><td>500</td><td>600<br>net</td></tr></tbody></table>"""


def test_table_markdown_neighbours():
    assert mk(type="table", cell="10", up="Q1", down="30", left="Apples", right="20").run(MD_TABLE).passed is True
    assert mk(type="table", cell="10", right="40").run(MD_TABLE).passed is False
    assert mk(type="table", cell="40", top_heading="Q2", left_heading="Pears").run(MD_TABLE).passed is True
    assert mk(type="table", cell="40", top_heading="Q1").run(MD_TABLE).passed is False
    assert mk(type="table", cell="10", ignore_markdown_tables=True).run(MD_TABLE).passed is False


def test_table_html_spans_and_headings():
    t = mk(type="table", cell="1,136", top_heading="2023")
    assert t.run(HTML_TABLE).passed is True
    # the colspan heading is above both year columns
    assert mk(type="table", cell="2023", up="Year Ended").run(HTML_TABLE).passed is True
    assert mk(type="table", cell="2024", up="Year Ended").run(HTML_TABLE).passed is True
    # the rowspan cell is left of the 2023 heading row too
    assert mk(type="table", cell="2023", left="Item").run(HTML_TABLE).passed is True
    assert mk(type="table", cell="500", left_heading="Cost", up="1,136").run(HTML_TABLE).passed is True
    assert mk(type="table", cell="600 net").run(HTML_TABLE).passed is True  # <br> -> newline -> space
    assert mk(type="table", cell="1,136", top_heading="2024").run(HTML_TABLE).passed is False


def test_table_fuzzy_threshold_both_sides():
    content = "| h1 | h2 |\n|---|---|\n| abcdefghij | klmnopqrst |\n"
    # ratio("abcdefghiX", "abcdefghij") = 0.9; max_diffs=1 -> threshold 0.9
    assert mk(type="table", cell="abcdefghiX", max_diffs=1).run(content).passed is True
    assert mk(type="table", cell="abcdefghXX", max_diffs=1).run(content).passed is False
    assert mk(type="table", cell="abcdefghiX").run(content).passed is False
    # neighbours use the same rule
    assert mk(type="table", cell="abcdefghij", right="klmnopqrsX", max_diffs=1).run(content).passed is True
    assert mk(type="table", cell="abcdefghij", right="klmnopqrXX", max_diffs=1).run(content).passed is False


def test_table_threshold_floor_is_half():
    content = "| h |\n|---|\n| abcd |\n"
    # max_diffs larger than the text: threshold is floored at 0.5
    assert mk(type="table", cell="abXY", max_diffs=10).run(content).passed is True  # ratio 0.5
    assert mk(type="table", cell="aXYZ", max_diffs=10).run(content).passed is False  # ratio 0.25


def test_table_none_found():
    out = mk(type="table", cell="x").run("no tables here")
    assert out.passed is False and "no tables" in out.explanation


# ------------------------------------------------------------------------------ baseline


def test_baseline_default():
    t = mk(type="baseline")
    assert t.run("Some normal text.").passed is True
    assert t.run("  \n ").passed is False
    assert t.run("text " + "ab" * 31).passed is False  # "ab" repeated 31 times at the end
    assert t.run("text " + "ab" * 30).passed is True  # 30 is allowed
    assert t.run("Hello \u4e16\u754c").passed is False  # CJK
    assert t.run("Hello \U0001f600").passed is False  # emoji
    assert t.run("Gr\u00fc\u00dfe \u0391\u03b2\u03b3 \u0416").passed is True  # Latin-1, Greek, Cyrillic allowed
    assert mk(type="baseline", check_disallowed_characters=False).run("Hello \u4e16").passed is True


def test_baseline_blank_page():
    t = mk(type="baseline", max_length=10)
    assert t.run("1234567890").passed is True
    assert t.run("12345678901").passed is False
    assert t.run("![a long description of the image](img.png)").passed is False
    t2 = mk(type="baseline", max_length=10, max_length_skips_image_alt_tags=True)
    assert t2.run("![a long description of the image](img.png)").passed is True


def test_trailing_repeats():
    assert trailing_repeats("a", 3) == [1, 0, 0]
    assert trailing_repeats("abab", 3) == [1, 2, 1]
    assert trailing_repeats("x  x  x", 2) == [1, 2]  # " x" twice (whitespace runs are one space)
    assert trailing_repeats("", 2) == [0, 0]


# ------------------------------------------------------------------------------ math (no browser)


class NoBrowser:
    available = False
    reason = "no browser in this test"

    def render_many(self, formulas):  # pragma: no cover - never called
        raise AssertionError

    def render(self, formula):  # pragma: no cover
        raise AssertionError


def test_math_skipped_without_browser():
    t = mk(type="math", math="a^{2}+b^{2}=c^{2}")
    out = t.run("$$a^{2}+b^{2}=c^{2}$$", NoBrowser())
    assert out.passed is None and out.skipped and "no browser" in out.explanation
    assert t.run("$$a^{2}+b^{2}=c^{2}$$", None).passed is None


def test_extract_formulas():
    md = r"Inline \(x+1\) and \[ y \] and $$ z $$ and $w$ end"
    assert extract_formulas(md) == ["x+1", "y", "z", "w"]
    assert extract_formulas(md, dollars=False) == ["x+1", "y"]
    assert extract_formulas("$$a$$ $b$") == ["a", "b"]  # $$ pairs go before single $


# ------------------------------------------------------------------------------ loading


@pytest.mark.parametrize(
    "bad, msg",
    [
        ({"type": "present", "text": "   "}, "empty"),
        ({"type": "present", "text": "x", "max_diffs": -1}, "max_diffs"),
        ({"type": "present", "text": "x", "bogus": 1}, "bogus"),
        ({"type": "nonsense"}, "unknown test type"),
        ({"type": "math", "math": " "}, "empty"),
    ],
)
def test_bad_tests_are_rejected(bad, msg):
    with pytest.raises(ValueError, match=msg):
        mk(**bad)
