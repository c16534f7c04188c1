"""The incremental block splitter: blocks come out as soon as their HTML closes, whatever the chunking; the
engine tap: a retried attempt resets the page at once, a given-up page is reset, a rescued page streams."""

from __future__ import annotations

import asyncio
import hashlib
from types import SimpleNamespace

import pytest
from PIL import Image

from ocrserve import parse_output
from ocrserve.engines import EngineResult, PageInput
from ocrserve.profiles import load_profile
from ocrserve.api.metrics import Metrics
from ocrserve.api.service import ImageCache, TapEngine
from ocrserve.api.stream import BlockSplitter, parse_block
from tests.fakes.standin import chandra_output

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


# ------------------------------------------------------------------ the engine tap: resets and fallback


class _Script:
    """An engine that streams a scripted list of deltas, checking what the tap has sent at each step."""

    name = "openai"

    def __init__(self, steps, raw: str, ok: bool = True) -> None:
        self.profile = load_profile("chandra-1")
        self.steps, self.raw, self.ok = steps, raw, ok

    async def ocr(self, page, *, on_delta=None):
        for step in self.steps:
            if callable(step):
                step()
            else:
                on_delta(step)
        return EngineResult(raw=self.raw if self.ok else "", ok=self.ok, engine=self.name,
                            error=None if self.ok else "gave up")

    def capacity(self) -> int:
        return 1

    async def aclose(self) -> None:
        return None


def _tap(engine, events, **kw) -> TapEngine:
    service = SimpleNamespace(metrics=Metrics(lambda: 0, lambda: 0), images=ImageCache(4))
    return TapEngine(engine, service, lambda kind, data: events.append((kind, data)), True, **kw)


def _page() -> PageInput:
    return PageInput("doc", 0, image=Image.new("RGB", (64, 80), "white"), width=612, height=792)


def test_an_empty_delta_resets_the_page_at_once() -> None:
    raw = _raw("retry")
    blocks = raw.split("\n")
    events: list = []

    def sent() -> list[str]:
        return [k for k, _ in events]

    def after_first_attempt() -> None:  # two closed blocks and an open one streamed so far
        assert sent() == ["page_started", "block", "block"]

    def after_reset() -> None:  # page_reset right when the engine starts over, before the retry's pieces
        assert sent()[-1] == "page_reset" and sent().count("block") == 2

    steps = [blocks[0], blocks[1], blocks[2][:20], after_first_attempt, "", after_reset] + [b + "\n" for b in blocks]
    engine = _Script(steps, "\n".join(blocks) + "\n")
    asyncio.run(_tap(engine, events).ocr(_page()))
    kinds = sent()
    assert kinds == ["page_started", "block", "block", "page_reset"] + ["block"] * len(blocks)
    retry = [d["block"] for k, d in events[4:]]
    assert [b["index"] for b in retry] == list(range(len(blocks)))  # numbered from 0 again
    assert [b["html"] for b in retry] == [b.html for b in parse_output(raw, "chandra-1", (612, 792)).blocks]


def test_a_given_up_page_is_reset_and_the_rescue_tap_streams_its_blocks() -> None:
    raw = _raw("rescue")
    events: list = []
    first, second = raw.split("\n")[:2]
    tap = _tap(_Script([first + "\n", second[:20]], raw, ok=False), events)
    res = asyncio.run(tap.ocr(_page()))
    assert not res.ok
    assert [k for k, _ in events] == ["page_started", "block", "page_reset"]  # what was sent is void
    events.clear()
    lite = _Script([], raw)  # a non-streaming engine (as lite is called by the fallback)
    rescue = _tap(lite, events, rescue=True, final_blocks=tap.final_blocks)
    asyncio.run(rescue.ocr(_page()))
    want = parse_output(raw, "chandra-1", (612, 792)).blocks
    assert [k for k, _ in events] == ["block"] * len(want)  # no second page_started
    assert [d["block"]["html"] for _, d in events] == [b.html for b in want]
    assert [b.html for b in tap.final_blocks[0]] == [b.html for b in want]  # page_done reports these
