"""What one conversion reports as it runs: page starts, streamed blocks, page ends, and the page metrics.

`ConversionTap` is made per conversion; `tap.engine(inner)` wraps the shared engine (and the lite
fallback, `rescue=True`) for it:
- the model engine's wrapper announces each page with `page_started` (with its image for the viewer)
  and streams each layout block as soon as its HTML closes in the model's token stream; an empty delta
  (the engine starts the page over: a retried attempt) sends `page_reset` at once, and so does a page
  the engine gives up on after blocks were sent (those blocks are not its answer);
- `tap.page_done(...)` gets each finished Page from the pipeline (the one parse of the page's answer):
  when what was streamed is not exactly that answer (an engine that does not stream, a rescued page),
  the Page's blocks replace it (`page_reset` if needed, then its blocks); then `page_done`.

Metrics: every page that reached the engine is counted once, with its latency, under its final status
(`ok`, `fallback`, `failed`), or `cancelled` when the conversion stopped before it was done (a client
that went away): `ocrserve_pages_total` and `ocrserve_page_latency_seconds_count` always agree.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ocrserve.api.stream import BlockSplitter, parse_block
from ocrserve.engines import Engine, EngineResult, PageInput

if TYPE_CHECKING:
    from ocrserve.api.images import PageImages
    from ocrserve.api.metrics import Metrics
    from ocrserve.document import Page
    from ocrserve.profiles import Profile

Sink = Callable[[str, dict[str, Any]], None]


class ConversionTap:
    def __init__(
        self, metrics: Metrics, images: PageImages, sink: Sink | None = None, stream: bool = False, owner: str = ""
    ) -> None:
        self.metrics, self.images, self.owner = metrics, images, owner
        self.sink = sink
        self.stream = stream and sink is not None
        self.fed: dict[int, bool] = {}  # page -> streamed text sent since its last reset
        self.exact: dict[int, bool] = {}  # page -> what was streamed is exactly the final answer
        self.latency: dict[int, float] = {}  # page -> engine time, until the page is counted

    def send(self, kind: str, data: dict[str, Any]) -> None:
        if self.sink is not None:
            self.sink(kind, data)

    def engine(self, inner: Engine, *, rescue: bool = False) -> TapEngine:
        return TapEngine(inner, self, rescue=rescue)

    def page_done(self, index: int, status: str, error: str | None, page: Page | None, resumed: bool = False) -> None:
        """A page the pipeline finished (resumed: kept from an interrupted run, not converted now)."""
        m = self.metrics
        if not resumed:
            m.pages.labels(status=status).inc()
            if status == "failed":
                m.failures.labels(kind="page").inc()
        if index in self.latency:
            m.page_latency.observe(self.latency.pop(index))
        if self.sink is None:
            return
        blocks = [b.model_dump() for b in (page.blocks if page is not None else [])]
        if self.stream and not self.exact.get(index, False):
            if self.fed.get(index):
                self.send("page_reset", {"page": index})
            for b in blocks:
                self.send("block", {"page": index, "block": b})
        self.send("page_done", {"page": index, "status": status, "error": error, "blocks": blocks})

    def close(self) -> None:
        """The conversion has stopped: pages that reached the engine and were never finished count as
        cancelled. Synchronous: runs under a cancellation too."""
        for _, elapsed in sorted(self.latency.items()):
            self.metrics.pages.labels(status="cancelled").inc()
            self.metrics.page_latency.observe(elapsed)
        self.latency.clear()


class TapEngine(Engine):
    """An engine wrapped for one conversion (see the module's docstring)."""

    def __init__(self, inner: Engine, tap: ConversionTap, *, rescue: bool = False) -> None:
        self.inner, self.tap, self.rescue = inner, tap, rescue
        self.name = inner.name

    @property  # the inner engine's, which may follow its server's model
    def profile(self) -> Profile:  # type: ignore[override]  # read-only here: set on the inner engine
        return self.inner.profile

    async def preflight(self) -> None:
        """The inner engine's check of its server (and, with no model chosen, the profile it serves)."""
        await self.inner.preflight()

    def capacity(self) -> int:
        return self.inner.capacity()

    async def aclose(self) -> None:  # the shared engine outlives a conversion
        return None

    async def ocr(self, page: PageInput, *, on_delta=None) -> EngineResult:
        tap, m, i = self.tap, self.tap.metrics, page.index
        size = (page.width, page.height)
        if tap.sink is not None and not self.rescue:
            token = tap.images.put(page.png_bytes(), tap.owner) if tap.stream else None
            w, h = page.image_size or (None, None)
            tap.send(
                "page_started",
                {
                    "page": i,
                    "width": page.width,
                    "height": page.height,
                    "unit": page.unit,
                    "image_width": w,
                    "image_height": h,
                    "image": f"/v1/pages/{token}.png" if token else None,
                },
            )
        splitter = BlockSplitter()
        count = 0
        t0 = time.perf_counter()
        first = True

        def reset() -> None:
            nonlocal splitter, count
            if splitter.text:
                tap.send("page_reset", {"page": i})
            splitter, count = BlockSplitter(), 0
            tap.fed[i] = False

        def delta(text: str) -> None:
            nonlocal count, first
            if text == "":  # the engine starts the page over (a retried attempt)
                reset()
                return
            tap.fed[i] = True
            for html in splitter.feed(text):
                blocks = parse_block(html, self.profile, size, page_index=i, block_index=count, unit=page.unit)
                if blocks and first and not self.rescue:
                    m.first_block.observe(time.perf_counter() - t0)
                    first = False
                for b in blocks:
                    count += 1
                    tap.send("block", {"page": i, "block": b.model_dump()})

        if not self.rescue:  # a rescue is not a page at the model engine
            m.in_flight.inc()
        try:
            res = await self.inner.ocr(page, on_delta=delta if tap.stream else None)
        finally:
            if not self.rescue:
                m.in_flight.dec()
                tap.latency[i] = time.perf_counter() - t0  # counted when the page is done, or cancelled
        if not tap.stream:
            return res
        if not res.ok:
            reset()  # what was sent is no answer: the page is rescued by the fallback, or fails
        else:
            tap.exact[i] = splitter.text == res.raw
        return res
