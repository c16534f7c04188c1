"""The incremental block splitter: blocks come out as soon as their HTML closes, whatever the chunking."""

from __future__ import annotations

import hashlib

import pytest

from ocrserve import parse_output
from ocrserve.server.stream import BlockSplitter, parse_block
from tests.standin import chandra_output

NESTED = '<div data-label="List-Group" data-bbox="[1, 2, 300, 400]"><div><p>a</p><div>b</div></div></div>'


def _raw(seed: str) -> str:
    return NESTED + "\n" + chandra_output(hashlib.sha256(seed.encode()).hexdigest(), 1024, 1024)


@pytest.mark.parametrize("size", [1, 2, 5, 13, 64, 10_000])
def test_every_top_level_block_once_in_order_for_any_chunking(size: int) -> None:
    raw = _raw(f"s{size}")
    s = BlockSplitter()
    out = []
    for i in range(0, len(raw), size):
        out += s.feed(raw[i:i + size])
    assert out == raw.split("\n")  # one block a line in the stand-in's answer, the nested one whole
    assert s.pending == "" and s.text == raw


def test_a_block_is_emitted_as_soon_as_it_closes_not_before() -> None:
    s = BlockSplitter()
    assert s.feed('junk <div data-label="Text" data-bbox="[0, 0, 10, 10]"><p>hel') == []
    assert s.pending.startswith('<div data-label="Text"')
    assert s.feed("lo</p><div>x</div") == []      # the inner div closes only at '>'
    assert s.feed("></di") == []
    assert s.feed("v>") == ['<div data-label="Text" data-bbox="[0, 0, 10, 10]"><p>hello</p><div>x</div></div>']
    assert s.feed('</div> <DIV data-label="Table">t</DIV >') == ['<DIV data-label="Table">t</DIV >']


def test_parse_block_matches_parsing_the_whole_answer() -> None:
    raw = _raw("whole")
    whole = parse_output(raw, "chandra-1", (612, 792), index=3).blocks
    s = BlockSplitter()
    got = []
    for html in s.feed(raw):
        got += parse_block(html, "chandra-1", (612, 792), page_index=3, block_index=len(got))
    assert [b.model_dump() for b in got] == [b.model_dump() for b in whole]
