"""The service core: one shared engine and render pool; uploads checked, then converted by the pipeline.

`Service.inspect()` opens an upload once (bad file -> 422 with the pipeline's reason, too many pages
-> 413); `Service.convert()` runs the pipeline on it with a tap on the engine that reports each page
as it starts (with its image for the viewer) and each layout block as soon as its HTML closes in the
model's token stream (a retried attempt resets the page with `page_reset`; a page the engine gives up
on and the lite fallback rescues streams the fallback's blocks).
"""

from __future__ import annotations

import asyncio
import logging
import re
import secrets
import time
import unicodedata
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Awaitable, Callable

from fastapi import HTTPException

from ocrserve.document import Block
from ocrserve.engines import Engine, EngineResult, PageInput, create_engine
from ocrserve.ingest.pool import ResilientPool, WorkerCrash, default_task_timeout, default_workers
from ocrserve.ingest.raster import DocumentError, SourceInfo, open_source
from ocrserve.ingest.sources import parse_page_ranges
from ocrserve.parse import parse_output
from ocrserve.pipeline.local import Converter, DocResult
from ocrserve.profiles import Profile, load_profile
from ocrserve.settings import Settings
from ocrserve.api.metrics import Metrics
from ocrserve.api.stream import BlockSplitter, parse_block

log = logging.getLogger(__name__)

Sink = Callable[[str, dict[str, Any]], None]

_UNSAFE = re.compile(r"[^A-Za-z0-9._ -]+")


def safe_filename(name: str | None) -> str:
    """An uploaded file's name reduced to a safe basename (folders, control and odd characters dropped)."""
    base = unicodedata.normalize("NFKC", (name or "").replace("\\", "/")).rsplit("/", 1)[-1]
    base = _UNSAFE.sub("_", base).strip(" .")[:120]
    return base or "upload"


class ImageCache:
    """Page PNGs kept for the viewer under unguessable tokens; the oldest go first."""

    def __init__(self, size: int) -> None:
        self.size = max(0, size)
        self._items: OrderedDict[str, bytes] = OrderedDict()

    def put(self, png: bytes) -> str | None:
        if self.size == 0:
            return None
        token = secrets.token_urlsafe(18)
        self._items[token] = png
        while len(self._items) > self.size:
            self._items.popitem(last=False)
        return token

    def get(self, token: str) -> bytes | None:
        return self._items.get(token)


@dataclass
class Checked:
    """An upload that opened: its path, what it is, the pages to convert."""

    path: Path
    filename: str
    info: SourceInfo | None
    pages: str | None
    selected: int


class TapEngine:
    """Wraps an engine for one conversion: reports page starts, streamed blocks and latency.

    The model engine's tap (`rescue=False`) announces each page with `page_started` and streams its
    blocks as they close; an empty delta (a retried attempt starts over) resets the page's splitter and
    sends `page_reset` at once; a page the engine gives up on after blocks were sent gets `page_reset`
    too, since those blocks are not its answer. The fallback engine's tap (`rescue=True`, shared by the
    conversion's taps through `final_blocks`) sends a rescued page's final blocks.
    """

    def __init__(self, inner: Engine, service: "Service", sink: Sink | None, stream: bool, *,
                 rescue: bool = False, final_blocks: dict[int, list[Block]] | None = None) -> None:
        self.inner, self.service, self.sink, self.stream, self.rescue = inner, service, sink, stream, rescue
        self.name = inner.name
        self.profile = inner.profile
        self.final_blocks: dict[int, list[Block]] = {} if final_blocks is None else final_blocks

    def capacity(self) -> int:
        return self.inner.capacity()

    async def aclose(self) -> None:  # the shared engine outlives a conversion
        return None

    def _send(self, kind: str, data: dict[str, Any]) -> None:
        if self.sink is not None:
            self.sink(kind, data)

    async def ocr(self, page: PageInput, *, on_delta=None) -> EngineResult:
        m = self.service.metrics
        size = (page.width, page.height)
        if self.sink is not None and not self.rescue:
            token = self.service.images.put(page.png_bytes()) if self.stream else None
            w, h = page.image_size or (None, None)
            self._send("page_started", {
                "page": page.index, "width": page.width, "height": page.height, "unit": page.unit,
                "image_width": w, "image_height": h, "image": f"/v1/pages/{token}.png" if token else None,
            })
        splitter = BlockSplitter()
        count = 0
        t0 = time.perf_counter()
        first = True

        def reset() -> None:
            nonlocal splitter, count
            if splitter.text:
                self._send("page_reset", {"page": page.index})
            splitter, count = BlockSplitter(), 0

        def delta(text: str) -> None:
            nonlocal count, first
            if text == "":  # the engine starts the page over (a retried attempt)
                reset()
                return
            for html in splitter.feed(text):
                blocks = parse_block(html, self.profile, size, page_index=page.index, block_index=count,
                                     unit=page.unit)
                if blocks and first and not self.rescue:
                    m.first_block.observe(time.perf_counter() - t0)
                    first = False
                for b in blocks:
                    count += 1
                    self._send("block", {"page": page.index, "block": b.model_dump()})

        streaming = self.stream and self.sink is not None
        if not self.rescue:  # a rescue is not a page at the model engine
            m.in_flight.inc()
        try:
            res = await self.inner.ocr(page, on_delta=delta if streaming else None)
        finally:
            if not self.rescue:
                m.in_flight.dec()
                m.page_latency.observe(time.perf_counter() - t0)
        if self.sink is None:
            return res
        if not res.ok:
            if streaming:
                reset()  # what was sent is no answer: the page is rescued by the fallback, or fails
            return res
        final = parse_output(res.raw, self.profile, size, index=page.index, unit=page.unit,
                             truncated=(res.finish_reason == "length") if res.finish_reason else None)
        self.final_blocks[page.index] = final.blocks
        if streaming and splitter.text != res.raw:
            # not streamed (the engine does not stream), or the stream differs from the final answer:
            # the final answer's blocks replace whatever was sent for this page
            reset()
            for b in final.blocks:
                self._send("block", {"page": page.index, "block": b.model_dump()})
        return res


class Service:
    def __init__(self, settings: Settings, engine: Engine, profile: Profile | None = None) -> None:
        self.settings = settings
        self.engine = engine
        self.profile = profile or getattr(engine, "profile", None) or load_profile(settings.model)
        self.pool = ResilientPool(default_workers(settings.render_workers, cap=8), start_method=settings.mp_start,
                                  task_timeout=default_task_timeout(settings))
        self.images = ImageCache(settings.page_image_cache)
        self.metrics: Metrics  # set by the app
        self._lite: Engine | None = None  # the fallback engine, made on first use

    async def aclose(self) -> None:
        self.pool.shutdown()
        if self._lite is not None:
            await self._lite.aclose()

    async def fallback_engine(self) -> Engine:
        """The lite engine that rescues pages the model engine gave up on (one for the service)."""
        if self._lite is None:  # no await in between: no other task can interleave
            self._lite = create_engine("lite", self.profile, self.settings)
        return self._lite

    # ------------------------------------------------------------------ checking an upload
    async def inspect(self, path: Path, filename: str, pages: str | None) -> Checked:
        if pages and any(int(n) > 1_000_000 for n in re.findall(r"\d+", pages)):
            raise HTTPException(400, f"pages={pages!r}: page numbers above 1000000 are not accepted")
        try:
            selected_list = parse_page_ranges(pages) if pages else None
        except ValueError as e:
            raise HTTPException(400, str(e).replace("--pages", "pages=")) from None
        try:
            info: SourceInfo = await self.pool.run(open_source, str(path), None, self.settings.max_image_pixels)
        except DocumentError as e:
            raise HTTPException(422, f"{filename}: {e}") from None
        except WorkerCrash as e:
            raise HTTPException(422, f"{filename}: {e}") from None
        if selected_list is None:
            selected = info.page_count
        else:
            selected = selected_list.count(info.page_count)
            if selected == 0:
                raise HTTPException(422, f"{filename}: pages={pages} selects none of its {info.page_count} pages")
        if selected > self.settings.max_pages:
            raise HTTPException(413, f"{filename}: {selected} pages to convert; the limit is {self.settings.max_pages}")
        return Checked(path=path, filename=filename, info=info, pages=pages, selected=selected)

    # ------------------------------------------------------------------ converting
    async def convert(self, checked: Checked, *, sink: Sink | None = None, stream: bool = False,
                      on_page: Callable[[int, str, Any], None] | None = None,
                      known_pages: dict[int, Any] | None = None) -> tuple[DocResult, bool, TapEngine]:
        """Run the pipeline on one checked upload. Returns (result, interrupted, tap). on_page(index,
        status, page) follows each page; known_pages (index -> Page, from an interrupted run of the same
        upload) are used as they are, not converted again."""
        tap = TapEngine(self.engine, self, sink, stream)

        async def fallback() -> Engine:
            return TapEngine(await self.fallback_engine(), self, sink, stream, rescue=True,
                             final_blocks=tap.final_blocks)

        def on_event(kind: str, data: dict[str, Any]) -> None:
            if kind == "page_done":
                if not data.get("resumed"):
                    self.metrics.pages.labels(status=data["status"]).inc()
                    if data["status"] == "failed":
                        self.metrics.failures.labels(kind="page").inc()
                if on_page:
                    on_page(data["index"], data["status"], data.get("page"))
                if sink is not None:
                    sink("page_done", {
                        "page": data["index"], "status": data["status"], "error": data.get("error"),
                        "blocks": [b.model_dump() for b in tap.final_blocks.get(data["index"], [])],
                    })

        conv = Converter(engine=tap, model=self.profile, settings=self.settings, pages=checked.pages,
                          pool=self.pool, figures=False, on_event=on_event, fallback_engine=fallback,
                          known_pages=(lambda name, sha: known_pages) if known_pages else None)
        try:
            summary = await conv.run([checked.path])
        finally:
            await conv.aclose()
        if not summary.results:
            result = DocResult(name=checked.filename, path=str(checked.path), status="failed",
                               error="interrupted" if summary.interrupted else "no result")
        else:
            result = summary.results[0]
        if not summary.interrupted:
            self.metrics.documents.labels(status=result.status).inc()
            if result.document is None:
                self.metrics.failures.labels(kind="document").inc()
        return result, summary.interrupted, tap

    async def ready(self) -> bool:
        check = getattr(self.engine, "check", None)
        if check is None:
            return True
        try:
            out = check()
            if asyncio.iscoroutine(out):
                out = await asyncio.wait_for(out, timeout=15)
            return bool(out)
        except Exception as e:  # noqa: BLE001 - readiness answers, it does not raise
            log.warning("engine check failed: %r", e)
            return False
