"""The streaming conversion pipeline: sources -> pages -> engine -> blocks -> Document -> files.

Stages are connected by bounded concurrency: rendering (worker processes) runs ahead of the engine
by at most `prefetch_pages` pages, the engine keeps `capacity()` pages in flight, parsing and figure
crops run in the workers, and a document is written as soon as its last page is back. Every page
ends in the Document as ok, fallback (the lite engine rescued it; the model's error kept) or failed
(with its error); a document that cannot be opened fails alone with its reason.
"""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Awaitable, Callable

from ocrserve.document import Document, Page, PageTimings, Source
from ocrserve.engines import Engine, EngineResult, PageInput, create_engine
from ocrserve.pipeline.page import with_fallback
from ocrserve.ingest.pool import ResilientPool, WorkerCrash, default_task_timeout, default_workers
from ocrserve.ingest.raster import Budget, DocumentError, RenderedPage, SourceInfo, forget, open_source, render_page
from ocrserve.ingest.sources import InputProblem, SourceFile, expand_sources, parse_page_ranges, path_hash
from ocrserve.pipeline.output import clean_stale_staging, is_complete, load_output, staging_dir, write_document
from ocrserve.pipeline.page import finish_page
from ocrserve.profiles import Profile, load_profile
from ocrserve.settings import Settings, get_settings

log = logging.getLogger(__name__)


@dataclass
class DocResult:
    name: str
    path: str
    status: str                      # ok, fallback, failed, skipped
    error: str | None = None
    document: Document | None = None
    output: Path | None = None
    pages: int = 0
    pages_failed: int = 0
    pages_fallback: int = 0


@dataclass
class RunSummary:
    results: list[DocResult] = field(default_factory=list)
    elapsed_s: float = 0.0
    interrupted: bool = False

    @property
    def failed(self) -> list[DocResult]:
        return [r for r in self.results if r.status == "failed"]

    @property
    def pages(self) -> int:
        return sum(r.pages for r in self.results if r.status != "skipped")

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for r in self.results:
            out[r.status] = out.get(r.status, 0) + 1
        return out


Event = Callable[[str, dict[str, Any]], None]


@dataclass
class _DocState:
    src: SourceFile
    info: SourceInfo
    indices: list[int]
    staging: Path | None
    pages: dict[int, Page] = field(default_factory=dict)
    done: asyncio.Event = field(default_factory=asyncio.Event)
    result: DocResult | None = None


class Converter:
    """Runs conversions with one engine. Use as an async context manager, or call aclose()."""

    def __init__(
        self,
        *,
        engine: str | Engine | None = None,
        model: str | Profile | None = None,
        settings: Settings | None = None,
        output_dir: str | Path | None = None,
        pages: str | list[int] | None = None,
        password: str | None = None,
        force: bool = False,
        fallback: bool | None = None,
        keep_headers_footers: bool | None = None,
        figures: bool = True,
        keep_raw: bool = False,
        on_event: Event | None = None,
        concurrency: int | None = None,
        render_workers: int | None = None,
        prefetch_pages: int | None = None,
        pool: ResilientPool | None = None,
        on_delta: Callable[[str, int, str], Any] | None = None,
        fallback_engine: Callable[[], Awaitable[Engine]] | None = None,
        known_pages: Callable[[str, str], dict[int, Page]] | None = None,
        **engine_options: Any,
    ) -> None:
        # known_pages(name, sha256) -> pages already converted (a resumed API job): used as they are
        self.known_pages = known_pages
        self.settings = settings or get_settings()
        self.profile = load_profile(model or self.settings.model)
        self.output_dir = Path(output_dir) if output_dir else None
        self.page_filter = parse_page_ranges(pages)
        self.password = password
        self.force = force
        self.fallback = self.settings.fallback if fallback is None else fallback
        self.keep_hf = self.settings.keep_headers_footers if keep_headers_footers is None else keep_headers_footers
        self.figures = figures
        self.keep_raw = keep_raw
        self.on_event = on_event
        self.budget = Budget.from_profile(self.profile)
        self.run_id = uuid.uuid4().hex[:8]
        if concurrency:
            engine_options["concurrency"] = concurrency
        if isinstance(engine, str) or engine is None:
            self.engine: Engine = create_engine(engine or self.settings.engine, self.profile, self.settings, **engine_options)
            self._own_engine = True
        else:
            self.engine, self._own_engine = engine, False
        # fallback_engine: a factory of a shared fallback engine (a service's), which is not closed here
        self._fallback_factory = fallback_engine
        self._fallback_engine: Engine | None = None
        self.last_summary: RunSummary | None = None
        # a long-lived service shares one engine and one pool between conversions
        self._own_pool = pool is None
        self.pool = pool or ResilientPool(
            default_workers(render_workers or self.settings.render_workers, cap=8), start_method=self.settings.mp_start,
            task_timeout=default_task_timeout(self.settings),
        )
        # on_delta(doc_name, page_index, text): raw model text as it streams (engines that stream)
        self.on_delta = on_delta
        cap = max(1, int(self.engine.capacity()))
        self.engine_sem = asyncio.Semaphore(cap)
        self.slots_n = cap + (prefetch_pages or self.settings.prefetch_pages)

    # -- events ---------------------------------------------------------------------------------
    def _emit(self, kind: str, **data: Any) -> None:
        if self.on_event:
            try:
                self.on_event(kind, data)
            except Exception:  # noqa: BLE001 - a progress display never breaks a run
                log.exception("event handler failed")

    # -- engine with fallback ---------------------------------------------------------------------
    async def _fallback(self) -> Engine:
        if self._fallback_engine is None:
            if self._fallback_factory is not None:
                self._fallback_engine = await self._fallback_factory()
            else:
                self._fallback_engine = create_engine("lite", self.profile, self.settings)
        return self._fallback_engine

    async def _ocr(self, pi: PageInput) -> tuple[EngineResult, str, str | None]:
        """(result, status, model error kept for a fallback page)."""
        async with self.engine_sem:
            try:
                if self.on_delta is not None:
                    cb = self.on_delta
                    res = await self.engine.ocr(pi, on_delta=lambda text: cb(pi.doc_id, pi.index, text))
                else:
                    res = await self.engine.ocr(pi)
            except Exception as e:  # noqa: BLE001 - an engine bug must not lose the page
                log.exception("engine %s raised on %s page %d", self.engine.name, pi.doc_id, pi.index + 1)
                res = EngineResult(ok=False, engine=self.engine.name, error=f"engine error: {e!r}")
        return await with_fallback(res, pi, engine_name=self.engine.name, enabled=self.fallback,
                                   get_fallback=self._fallback)

    # -- one page ---------------------------------------------------------------------------------
    async def _page(self, st: _DocState, index: int) -> Page:
        src, info = st.src, st.info
        try:
            rp: RenderedPage = await self.pool.run(
                render_page, str(src.path), info.type, index, self.budget, self.password, self.settings.max_image_pixels
            )
        except (DocumentError, WorkerCrash) as e:
            return Page(index=index, width=0, height=0, status="failed", error=f"render: {e}")
        except Exception as e:  # noqa: BLE001
            return Page(index=index, width=0, height=0, status="failed", error=f"render: {e!r}")
        pi = PageInput(
            doc_id=src.name, index=index, png=rp.png, width=rp.width, height=rp.height, unit=rp.unit,
            source_path=str(src.path), source_type=info.type, password=self.password, render_s=rp.render_s,
            image_size=(rp.image_width, rp.image_height),
        )
        t0 = time.perf_counter()
        res, status, model_error = await self._ocr(pi)
        engine_s = time.perf_counter() - t0
        if status == "failed":
            page = Page(index=index, width=rp.width, height=rp.height, unit=rp.unit, status="failed",
                        image_width=rp.image_width, image_height=rp.image_height)
        else:
            try:
                page = await self.pool.run(
                    finish_page, res.raw, self.profile, index=index, width=rp.width, height=rp.height, unit=rp.unit,
                    image_size=(rp.image_width, rp.image_height), png=rp.png if self.figures else None,
                    staging=str(st.staging) if (st.staging and self.figures) else None,
                    prefix=src.basename, truncated=(res.finish_reason == "length") if res.finish_reason else None,
                )
            except Exception as e:  # noqa: BLE001 - the parser never throws; a crashed worker can
                page = Page(index=index, width=rp.width, height=rp.height, unit=rp.unit, status="failed")
                model_error = f"postprocess: {e}"
                status = "failed"
        page.status = status  # type: ignore[assignment]
        page.engine = res.engine or self.engine.name
        page.attempts = res.attempts
        page.prompt_tokens, page.completion_tokens = res.prompt_tokens, res.completion_tokens
        page.error = model_error
        # the engine's own time for the page (request to answer, retries included), else the wait here too
        page.timings = PageTimings(render_s=rp.render_s, engine_s=res.elapsed_s or engine_s, parse_s=page.timings.parse_s)
        if self.keep_raw:
            page.raw = res.raw
        return page

    async def _page_task(self, st: _DocState, index: int, slots: asyncio.Semaphore) -> None:
        try:
            try:
                page = await self._page(st, index)
            except asyncio.CancelledError:
                raise
            except Exception as e:  # noqa: BLE001 - a bug here must not hang the document
                log.exception("page %d of %s", index + 1, st.src.path)
                page = Page(index=index, width=0, height=0, status="failed", error=f"internal error: {e!r}")
        finally:
            slots.release()
        st.pages[index] = page
        self._emit("page_done", name=st.src.name, index=index, status=page.status, error=page.error, page=page)
        if len(st.pages) == len(st.indices):
            await self._finish_doc(st)

    # -- one document -------------------------------------------------------------------------------
    async def _finish_doc(self, st: _DocState) -> None:
        try:
            await self._assemble(st)
        except Exception as e:  # noqa: BLE001
            log.exception("assembling %s", st.src.path)
            st.result = DocResult(name=st.src.name, path=str(st.src.path), status="failed", error=f"internal error: {e!r}")
            self._emit("doc_done", result=st.result)
        finally:
            st.done.set()

    async def _assemble(self, st: _DocState) -> None:
        pages = [st.pages[i] for i in st.indices]
        doc = Document(
            source=Source(path=str(st.src.path), sha256=st.info.sha256, type=st.info.type, page_count=st.info.page_count),
            model=self.profile.name if self.engine.name != "lite" else "lite",
            pages=pages,
        )
        n_failed = sum(p.status == "failed" for p in pages)
        n_fb = sum(p.status == "fallback" for p in pages)
        result = DocResult(
            name=st.src.name, path=str(st.src.path), status=doc.status, document=doc, pages=len(pages),
            pages_failed=n_failed, pages_fallback=n_fb,
            error="; ".join(f"page {p.index + 1}: {p.error}" for p in pages if p.status == "failed")[:2000] or None,
        )
        if self.output_dir is not None:
            try:
                result.output = await asyncio.to_thread(
                    write_document, doc, self.output_dir, st.src.name, st.staging, keep_headers_footers=self.keep_hf
                )
            except OSError as e:
                result.status, result.error = "failed", f"cannot write output: {e}"
        try:
            await self.pool.run(forget, str(st.src.path))
        except Exception:  # noqa: BLE001
            pass
        st.result = result
        self._emit("doc_done", result=result)

    async def _open(self, src: SourceFile) -> SourceInfo | DocResult:
        try:
            return await self.pool.run(open_source, str(src.path), self.password, self.settings.max_image_pixels)
        except (DocumentError, WorkerCrash) as e:
            return DocResult(name=src.name, path=str(src.path), status="failed", error=str(e))
        except Exception as e:  # noqa: BLE001
            return DocResult(name=src.name, path=str(src.path), status="failed", error=f"cannot open: {e!r}")

    async def _preflight(self) -> None:
        """Fail the run at once, with the reason, when the engine cannot work at all (server down,
        wrong URL, key refused) — instead of sending every page to the fallback."""
        pre = getattr(self.engine, "preflight", None)
        if pre is not None:
            await pre()

    def _name_for(self, src: SourceFile, info: SourceInfo) -> tuple[SourceFile, dict | None]:
        """(the document's output name, the JSON already written under it). A document already in
        OUT under this name from another file keeps its output: this one gets a short hash of its
        path (a later run never overwrites an unrelated document)."""
        if self.output_dir is None:
            return src, None
        data = load_output(self.output_dir, src.name)
        prev = (data or {}).get("source") or None
        if prev is None or prev.get("sha256") == info.sha256:
            return src, data
        if os.path.abspath(prev.get("path") or "") == os.path.abspath(src.path):
            return src, data  # the same file, changed: converted again under its name
        other = SourceFile(path=src.path, name=f"{src.name}-{path_hash(src.path)}")
        return other, load_output(self.output_dir, other.name)

    async def run(self, inputs: list[str | Path] | str | Path) -> RunSummary:
        """Convert every input; one bad document never stops the others.

        Cancelling the task that runs this (Ctrl-C in the CLI, a timeout in the Python API) stops
        it cleanly: finished documents are kept, unfinished ones leave nothing behind, and the
        CancelledError goes on up (`self.last_summary` holds what was done).
        """
        if isinstance(inputs, (str, Path)):
            inputs = [inputs]
        t0 = time.perf_counter()
        sources = expand_sources(list(inputs))  # documents, and what could not be read (fails, named)
        await self._preflight()
        self._emit("run_start", documents=len(sources))
        if self.output_dir is not None:
            self.output_dir.mkdir(parents=True, exist_ok=True)
            clean_stale_staging(self.output_dir)
        summary = RunSummary()
        self.last_summary = summary
        slots = asyncio.Semaphore(self.slots_n)
        states: list[_DocState] = []
        tasks: set[asyncio.Task] = set()
        order: dict[str, int] = {}

        def finish() -> RunSummary:
            # keep the input order in the summary
            summary.results.extend(st.result for st in states if st.result is not None)
            summary.results.sort(key=lambda r: order.get(r.name, 0))
            summary.elapsed_s = time.perf_counter() - t0
            self._emit("run_done", summary=summary)
            return summary

        try:
            for n, src in enumerate(sources):
                order[src.name] = n
                if isinstance(src, InputProblem):
                    r = DocResult(name=src.name, path=str(src.path), status="failed", error=src.reason)
                    summary.results.append(r)
                    self._emit("doc_done", result=r)
                    continue
                opened = await self._open(src)
                if isinstance(opened, DocResult):
                    summary.results.append(opened)
                    self._emit("doc_done", result=opened)
                    continue
                info = opened
                src, existing = self._name_for(src, info)
                order[src.name] = n
                indices = list(range(info.page_count))
                if self.page_filter is not None:
                    indices = self.page_filter.indices(info.page_count)
                if not indices:
                    r = DocResult(name=src.name, path=str(src.path), status="failed",
                                  error=f"no pages selected (the document has {info.page_count})")
                    summary.results.append(r)
                    self._emit("doc_done", result=r)
                    continue
                if (self.output_dir is not None and not self.force
                        and is_complete(self.output_dir, src.name, info.sha256, indices, data=existing)):
                    r = DocResult(name=src.name, path=str(src.path), status="skipped", pages=0)
                    summary.results.append(r)
                    self._emit("doc_done", result=r)
                    continue
                staging = staging_dir(self.output_dir, src.name, self.run_id) if self.output_dir is not None else None
                if staging is not None:
                    staging.mkdir(parents=True, exist_ok=True)
                st = _DocState(src=src, info=info, indices=indices, staging=staging)
                states.append(st)
                self._emit("doc_start", name=src.name, pages=len(indices))
                known = self.known_pages(src.name, info.sha256) if self.known_pages else {}
                for i in indices:
                    page = known.get(i)
                    if page is not None and page.index == i and page.status != "failed":
                        st.pages[i] = page
                        self._emit("page_done", name=src.name, index=i, status=page.status, error=page.error,
                                   page=page, resumed=True)
                if len(st.pages) == len(indices):
                    await self._finish_doc(st)
                    continue
                for i in indices:
                    if i in st.pages:
                        continue
                    await slots.acquire()
                    t = asyncio.create_task(self._page_task(st, i, slots))
                    tasks.add(t)
                    t.add_done_callback(tasks.discard)
            for st in states:
                await st.done.wait()
        except asyncio.CancelledError:
            summary.interrupted = True
            for t in list(tasks):
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            for st in states:
                if st.result is None and st.staging is not None:
                    shutil.rmtree(st.staging, ignore_errors=True)
            finish()
            raise
        return finish()

    async def aclose(self) -> None:
        if self._own_pool:
            self.pool.shutdown()
        if self._own_engine:
            await self.engine.aclose()
        if self._fallback_engine is not None and self._fallback_factory is None:
            await self._fallback_engine.aclose()

    async def __aenter__(self) -> "Converter":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()


async def aconvert(paths, *, output_dir: str | Path | None = None, **options: Any) -> list[Document]:
    """Convert files/folders/globs; returns the Documents (failed documents are logged and left out)."""
    conv = Converter(output_dir=output_dir, **options)
    try:
        summary = await conv.run(paths if isinstance(paths, (list, tuple)) else [paths])
    finally:
        await conv.aclose()
    for r in summary.failed:
        if r.document is None:
            log.error("%s: %s", r.path, r.error)
    return [r.document for r in summary.results if r.document is not None]


def convert(paths, *, output_dir: str | Path | None = None, **options: Any) -> list[Document]:
    """Synchronous convert(): files/folders/globs -> Documents (and files when output_dir is given)."""
    return asyncio.run(aconvert(paths, output_dir=output_dir, **options))
