"""The incremental block splitter: blocks come out as soon as their HTML closes, whatever the chunking; the
engine tap: a retried attempt resets the page at once, a given-up page is reset, a rescued page's blocks come
from the pipeline's Page (the page's one parse); page metrics agree whatever happens."""

from __future__ import annotations

import asyncio
import hashlib

import pytest
from PIL import Image

from ocrserve import parse_output
from ocrserve.api.images import PageImages
from ocrserve.api.metrics import Metrics
from ocrserve.api.stream import BlockSplitter, parse_block
from ocrserve.api.tap import ConversionTap
from ocrserve.engines import EngineResult, PageInput
from ocrserve.profiles import load_profile
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
        out += s.feed(raw[i : i + size])
    assert out == raw.split("\n")  # one block a line in the stand-in's answer, the nested one whole
    assert s.pending == "" and s.text == raw


def test_a_block_is_emitted_as_soon_as_it_closes_not_before() -> None:
    s = BlockSplitter()
    assert s.feed('junk <div data-label="Text" data-bbox="[0, 0, 10, 10]"><p>hel') == []
    assert s.pending.startswith('<div data-label="Text"')
    assert s.feed("lo</p><div>x</div") == []  # the inner div closes only at '>'
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
        return EngineResult(
            raw=self.raw if self.ok else "", ok=self.ok, engine=self.name, error=None if self.ok else "gave up"
        )

    def capacity(self) -> int:
        return 1

    async def aclose(self) -> None:
        return None


def _conv(events) -> ConversionTap:
    return ConversionTap(
        Metrics(lambda: 0, lambda: 0), PageImages(10_000_000), lambda kind, data: events.append((kind, data)), True
    )


def _tap(engine, events, **kw):
    return _conv(events).engine(engine, **kw)


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


def test_a_given_up_page_is_reset_and_the_rescued_page_sends_the_pipelines_blocks() -> None:
    raw = _raw("rescue")
    events: list = []
    first, second = raw.split("\n")[:2]
    conv = _conv(events)
    res = asyncio.run(conv.engine(_Script([first + "\n", second[:20]], raw, ok=False)).ocr(_page()))
    assert not res.ok
    assert [k for k, _ in events] == ["page_started", "block", "page_reset"]  # what was sent is void
    events.clear()
    lite = _Script([], raw)  # a non-streaming engine (as lite is called by the fallback)
    asyncio.run(conv.engine(lite, rescue=True).ocr(_page()))
    assert events == []  # nothing parsed here: the pipeline's Page is the page's one parse
    page = parse_output(raw, "chandra-1", (612, 792), index=0)
    conv.page_done(0, "fallback", "gave up", page)
    want = [b.html for b in page.blocks]
    assert [k for k, _ in events] == ["block"] * len(want) + ["page_done"]  # no second page_started, no reset
    assert [d["block"]["html"] for k, d in events if k == "block"] == want
    assert [b["html"] for b in events[-1][1]["blocks"]] == want and events[-1][1]["status"] == "fallback"


def test_a_streamed_page_that_matches_its_answer_is_not_sent_again() -> None:
    raw = _raw("exact")
    events: list = []
    conv = _conv(events)
    asyncio.run(conv.engine(_Script([b + "\n" for b in raw.split("\n")], raw + "\n")).ocr(_page()))
    streamed = [d["block"]["html"] for k, d in events if k == "block"]
    conv.page_done(0, "ok", None, parse_output(raw + "\n", "chandra-1", (612, 792), index=0))
    assert [k for k, _ in events].count("block") == len(streamed) and events[-1][0] == "page_done"
    assert [b["html"] for b in events[-1][1]["blocks"]] == streamed


def _samples(metrics: Metrics) -> dict[str, float]:
    out = {}
    for fam in metrics.registry.collect():
        for s in fam.samples:
            if s.name == "ocrserve_pages_total":
                out[s.labels["status"]] = s.value
            elif s.name == "ocrserve_page_latency_seconds_count":
                out["latency_count"] = s.value
    return out


def test_pages_cancelled_at_the_engine_or_after_it_are_counted_once_with_their_latency() -> None:
    events: list = []
    conv = _conv(events)

    class Hang(_Script):
        async def ocr(self, page, *, on_delta=None):
            await asyncio.sleep(3600)

    async def main() -> None:
        done = asyncio.create_task(conv.engine(_Script([], _raw("a"))).ocr(_page()))  # answered, never finished
        await done
        stuck = asyncio.create_task(
            conv.engine(Hang([], "")).ocr(PageInput("doc", 1, image=Image.new("RGB", (8, 8)), width=612, height=792))
        )
        await asyncio.sleep(0.01)
        stuck.cancel()  # the client went away while the page was at the engine
        with pytest.raises(asyncio.CancelledError):
            await stuck

    asyncio.run(main())
    assert _samples(conv.metrics) == {"latency_count": 0}  # nothing counted before the end
    conv.close()
    got = _samples(conv.metrics)
    assert got == {"cancelled": 2, "latency_count": 2}, got
