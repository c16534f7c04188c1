"""Page selections are ranges (#16.3): cheap to parse, bounded, never a list of every page number."""

from __future__ import annotations

import pickle
import tracemalloc

import pytest

from ocrserve.ingest.sources import MAX_PAGE_RANGES, InputError, PageSelection, parse_page_ranges


def test_300_huge_ranges_stay_one_small_range():
    spec = ",".join(["1-1000000"] * 300)
    tracemalloc.start()
    try:
        sel = parse_page_ranges(spec)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert sel.ranges == ((0, 1_000_000),)
    # a list of a million ints alone is ~8 MB of pointers (+ the ints): the parse stays far below that
    assert peak < 1_000_000, peak
    assert 0 in sel and 999_999 in sel and 1_000_000 not in sel and -1 not in sel
    assert sel.indices(5) == [0, 1, 2, 3, 4]
    assert sel.count(7) == 7


def test_ranges_sorted_and_merged_and_membership():
    sel = parse_page_ranges("9, 3-5, 4-7, 1, 2")
    assert sel.ranges == ((0, 7), (8, 9))
    assert [i for i in range(12) if i in sel] == [0, 1, 2, 3, 4, 5, 6, 8]
    assert sel.indices(8) == [0, 1, 2, 3, 4, 5, 6]
    assert sel.indices(100) == [0, 1, 2, 3, 4, 5, 6, 8]
    assert sel.count(100) == 8 and sel.count(3) == 3
    assert pickle.loads(pickle.dumps(sel)) == sel  # shipped to Ray workers


def test_python_api_index_lists_and_selections_pass_through():
    assert parse_page_ranges([5, 0, 1, 1, 2]).ranges == ((0, 3), (5, 6))
    sel = PageSelection.of([3])
    assert parse_page_ranges(sel) is sel
    assert parse_page_ranges(None) is None and parse_page_ranges("  ") is None


def test_too_many_ranges_is_a_clear_error():
    parse_page_ranges(",".join(str(i) for i in range(1, MAX_PAGE_RANGES + 1)))  # at the bound: fine
    spec = ",".join(str(i) for i in range(1, MAX_PAGE_RANGES + 2))
    with pytest.raises(InputError, match=r"--pages '1,2,3.*more than 1,000 page ranges"):
        parse_page_ranges(spec)


@pytest.mark.parametrize(
    "bad,why",
    [
        ("1-2000000", "page numbers above 1,000,000"),
        ("9" * 5000, "not a page number"),
        ("1-2-3", "not a page number"),
        ("5-2", "not a page number"),
    ],
)
def test_bad_selections_name_the_part(bad, why):
    with pytest.raises(InputError, match=why):
        parse_page_ranges(bad)
