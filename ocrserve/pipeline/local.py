"""The local scheduler: sources -> pages -> engine -> blocks -> Document -> files, on one asyncio loop.

It only schedules: every per-page and per-document step is pipeline/page.py's and output.py's, shared with
the Ray scheduler (pipeline/ray.py). Stages are connected by bounded concurrency: rendering (worker processes)
runs ahead of the engine by at most `prefetch_pages` pages, the engine keeps `capacity()` pages in flight,
parsing and figure crops run in the workers, and a document is written as soon as its last page is back.
Every page ends as ok, fallback (lite rescued it) or failed (its error); an unopenable document fails alone.
"""

from __future__ import annotations

import asyncio
import logging
import shutil
import time
import uuid
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from ocrserve.document import Page
from ocrserve.engines import Engine, EngineResult, PageInput, create_engine
from ocrserve.engines.base import engine_error
from ocrserve.ingest.office import prepare_async as prepare_office
from ocrserve.ingest.pool import ResilientPool, default_workers, run_pool
from ocrserve.ingest.raster import Budget, RenderedPage, SourceInfo, forget, open_source, render_page
from ocrserve.ingest.sources import InputProblem, SourceFile, expand_sources, parse_page_ranges
from ocrserve.pipeline import page as steps
from ocrserve.pipeline.cancel import stop_tasks, wait_through_cancel
from ocrserve.pipeline.options import ConvertOptions
from ocrserve.pipeline.output import Plan, alt_name, done_though_unreadable, plan_document, render_context
from ocrserve.pipeline.rescue import Rescue
from ocrserve.pipeline.results import DocResult, DocStatus, Event, RunSummary, document_result, emitter
from ocrserve.pipeline.target import OutputTarget, formats_added
from ocrserve.profiles import load_profile
from ocrserve.settings import Settings, get_settings

log = logging.getLogger(__name__)

__all__ = ["Converter", "ConvertOptions", "DocResult", "RunSummary", "Event"]


@dataclass
class _DocState:
    n: int  # its input's number in the run
    src: SourceFile
    info: SourceInfo
    indices: list[int]
    staging: Path | None
    formats: tuple[str, ...]  # what it is written in: those asked, and those its output had
    redo: str | None = None  # why pages an earlier run wrote are converted again
    pages: dict[int, Page] = field(default_factory=dict)
    resumed: int = 0  # pages kept as an earlier run (or the job's store) had them, not converted now
    done: asyncio.Event = field(default_factory=asyncio.Event)
    result: DocResult | None = None


class Converter:
    """Runs conversions with one engine. Use as an async context manager, or call aclose().

    `options` (ConvertOptions) say what to do; keyword arguments are the same options one by one
    (`Converter(output_dir="out", pages="1-3")`). The rest are a caller's hooks: `engine` (an Engine, instead of one
    built from the options), `on_event(kind, data)`, `on_delta(doc, page, text)` (raw model text as it streams),
    `pool` and `fallback_engine` (a long-lived service shares them), `known_pages(name, sha256)` (pages already
    converted, used as they are: a resumed API job); `keep_documents=False` (the CLI: a long run's memory stays
    flat) leaves each DocResult's `document` None once its doc_done event has had it (and its files are written),
    and the run's summary keeps counts and the documents it names at the end, no results (keep_results).
    """

    def __init__(
        self,
        options: ConvertOptions | None = None,
        *,
        engine: str | Engine | None = None,
        settings: Settings | None = None,
        on_event: Event | None = None,
        on_delta: Callable[[str, int, str], Any] | None = None,
        pool: ResilientPool | None = None,
        fallback_engine: Callable[[], Awaitable[Engine]] | None = None,
        known_pages: Callable[[str, str], dict[int, Page]] | None = None,
        keep_documents: bool = True,
        **option_values: Any,
    ) -> None:
        options = ConvertOptions.of(options, engine, **option_values)
        self.settings = settings or get_settings()
        self.options = opts = options.resolve(self.settings)
        self.profile = load_profile(opts.model)
        self.target = OutputTarget(opts.output) if opts.output is not None else None
        if self.target is not None and self.target.local is None:
            raise ValueError(f"output {opts.output}: URL outputs need --ray (a local run writes to a folder)")
        self.output_dir = self.target.local if self.target is not None else None
        self.page_filter = parse_page_ranges(opts.pages)
        self.known_pages = known_pages
        self.emit = emitter(on_event)
        self.budget = Budget.from_profile(self.profile)
        self.run_id = uuid.uuid4().hex[:8]
        if engine is None or isinstance(engine, str):
            # the profile as chosen (None: the default, or what a server serves)
            self.engine: Engine = create_engine(opts.engine, opts.model, self.settings, **opts.engine_kwargs())
            self._own_engine = True
        else:
            self.engine, self._own_engine = engine, False
        self.model_engine = self.engine.innermost().model_engine
        # the pages a model gives up on: rescued by the fallback (a service's shared one, or one made here)
        self.rescue = Rescue(self.profile, self.settings, shared=fallback_engine)
        if opts.fallback:
            self.engine = self.rescue.wrap(self.engine)
        self.last_summary: RunSummary | None = None
        self._live: dict[int, _DocState] = {}  # the run's documents being converted, by input number
        self._own_pool = pool is None
        # one pool of worker processes a run: an engine of its own that works in worker processes (lite) runs
        # its pages in the run's pool, sized for the larger ask, its workers started with the engine's initializer
        asks = self.engine.innermost().pool_workers() if self._own_engine and pool is None else None
        workers, init, args = asks or (0, None, ())
        self.pool = pool or run_pool(
            self.settings, max(default_workers(opts.render_workers or 0, cap=8), workers), init, args
        )
        if asks is not None:
            self.engine.innermost().use_pool(self.pool)
        self.on_delta = on_delta
        self.keep_documents = keep_documents
        cap = max(1, int(self.engine.capacity()))
        self.engine_sem = asyncio.Semaphore(cap)
        self.slots_n = cap + int(opts.prefetch_pages or 0)

    # -- the engine -----------------------------------------------------------------------------------
    async def _ocr(self, pi: PageInput) -> tuple[EngineResult, str, str | None]:
        """(result, status, model error kept for a fallback page)."""
        async with self.engine_sem:
            try:
                if self.on_delta is not None:
                    cb = self.on_delta
                    res = await self.engine.ocr(pi, on_delta=lambda text: cb(pi.doc_id, pi.index, text))
                else:
                    res = await self.engine.ocr(pi)
            except Exception as e:
                log.exception("engine %s raised on %s page %d", self.engine.name, pi.doc_id, pi.index + 1)
                res = engine_error(self.engine.name, e)
        return (res, *steps.page_status(res))

    # -- one page ---------------------------------------------------------------------------------
    async def _page(self, st: _DocState, index: int) -> Page:
        src, info, opts = st.src, st.info, self.options
        try:
            rp: RenderedPage = await self.pool.run(
                render_page, str(src.path), info.type, index, self.budget, opts.password, self.settings.max_image_pixels
            )
        except Exception as e:  # noqa: BLE001 - a page that cannot be rendered fails alone
            return steps.render_failed(index, e)
        pi = steps.page_input(src.name, rp, str(src.path), info.type, opts.password)
        t0 = time.perf_counter()
        res, status, model_error = await self._ocr(pi)
        engine_s = time.perf_counter() - t0
        parsed: Page | BaseException | None = None
        if status != "failed":
            fill = res.extra.get("fill_raw")
            figures = opts.figures and st.staging is not None and steps.may_have_figures(self.profile, res.raw, fill)
            try:
                parsed = await self.pool.run(
                    steps.finish_page,
                    res.raw,
                    self.profile,
                    png=rp.png if figures else None,
                    staging=str(st.staging) if figures else None,
                    prefix=src.basename,
                    **steps.parse_kwargs(res, rp),
                )
            except Exception as e:  # noqa: BLE001
                parsed = e
        return steps.result_page(
            res,
            status,
            model_error,
            rp,
            parsed,
            engine_s=engine_s,
            default_engine=self.engine.name,
            keep_raw=opts.keep_raw,
        )

    async def _page_task(self, st: _DocState, index: int, slots: asyncio.Semaphore) -> None:
        try:
            try:
                page = await self._page(st, index)
            except asyncio.CancelledError:
                raise
            except Exception as e:
                log.exception("page %d of %s", index + 1, st.src.path)
                page = Page(index=index, width=0, height=0, status="failed", error=f"internal error: {e!r}")
        finally:
            slots.release()
        self._page_done(st, page)
        if len(st.pages) == len(st.indices):
            await self._finish_doc(st)

    def _page_done(self, st: _DocState, page: Page, **extra: Any) -> None:
        st.pages[page.index] = page
        self.emit(
            "page_done", name=st.src.name, index=page.index, status=page.status, error=page.error, page=page, **extra
        )

    # -- one document -------------------------------------------------------------------------------
    async def _finish_doc(self, st: _DocState) -> None:
        try:
            await self._assemble(st)
        except Exception as e:
            log.exception("assembling %s", st.src.path)
            st.result = DocResult(
                name=st.src.name, path=str(st.src.path), status=DocStatus.FAILED, error=f"internal error: {e!r}"
            )
            self.emit("doc_done", result=st.result)
        finally:
            st.done.set()
            st.pages, st.indices = {}, []  # in the Document now: a long run keeps no finished page
            if st.result is not None:  # counted, and let go
                if not self.keep_documents:
                    st.result.document = None
                self._live.pop(st.n, None)
                if self.last_summary is not None:
                    self.last_summary.add(st.result, st.n)

    async def _assemble(self, st: _DocState) -> None:
        doc = steps.assemble_document(
            str(st.src.path),
            st.info,
            [st.pages[i] for i in st.indices],
            steps.document_model(self.engine.name, self.profile.name, self.model_engine),
        )
        result = document_result(st.src.name, str(st.src.path), doc)
        result.redo, result.pages_resumed = st.redo, st.resumed
        cancelled = False
        if self.target is not None:
            # a write that started finishes (Ctrl-C mid-write): the document is whole and counted
            ctx = render_context(self.options)
            write = partial(self.target.write, doc, st.src.name, {}, self.run_id, formats=st.formats, ctx=ctx)
            fut: asyncio.Future[str] = asyncio.ensure_future(asyncio.to_thread(write))
            cancelled = await wait_through_cancel(fut)
            try:
                result.output = Path(fut.result())
            except (OSError, ValueError) as e:
                result.status, result.error = DocStatus.FAILED, f"cannot write output: {e}"
        st.result = result  # counted before anything else can be interrupted
        self.emit("doc_done", result=result)
        if cancelled:
            raise asyncio.CancelledError
        try:
            await self.pool.run(forget, str(st.src.path))
        except Exception:  # noqa: BLE001 - closing the workers' handle of a finished document is best effort
            pass

    async def _open(self, src: SourceFile) -> SourceInfo | DocResult:
        try:
            return await self.pool.run(
                open_source, str(src.path), self.options.password, self.settings.max_image_pixels
            )
        except Exception as e:  # noqa: BLE001 - one bad document never stops the others
            t = self.target
            if (
                t is not None
                and not self.options.force
                and done_though_unreadable(e, t.load_existing(src.name), self.page_filter, self.options.formats)
            ):
                return DocResult(name=src.name, path=str(src.path), status=DocStatus.SKIPPED)
            return DocResult(name=src.name, path=str(src.path), status=DocStatus.FAILED, error=steps.open_error(e))

    def _plan(self, src: SourceFile, info: SourceInfo) -> Plan:
        t = self.target
        return plan_document(
            src,
            info.sha256,
            info.page_count,
            steps.page_indices(self.page_filter, info.page_count),
            writes=t is not None,
            force=self.options.force,
            here=t.load_existing(src.name) if t is not None else None,
            alt=lambda: t.load_existing(alt_name(src)) if t is not None else None,
            formats=self.options.formats,
            redo_fallback=self.model_engine,
            model=self.profile.name if self.model_engine else None,
        )

    async def run(self, inputs: list[str | Path] | str | Path) -> RunSummary:
        """Convert every input; one bad document never stops the others.

        Cancelling the task that runs this (Ctrl-C in the CLI, a timeout in the Python API) stops
        it cleanly: finished documents are kept, unfinished ones leave nothing behind, and the
        CancelledError goes on up (`self.last_summary` holds what was done).
        """
        if isinstance(inputs, (str, Path)):
            inputs = [inputs]
        t0 = time.perf_counter()
        # documents, and what could not be read (fails, named); names taken in the output folder are kept
        if self.target is not None:
            self.target.begin_run()
        sources = expand_sources(
            list(inputs), occupant=self.target.occupant if self.target is not None else None, exclude=self.output_dir
        )
        await self.engine.preflight()  # a server down, a key refused or another model fails the run at once
        if self.engine.profile.name != self.profile.name:  # no profile chosen: the one the server serves
            self.profile = self.rescue.profile = self.engine.profile
            self.budget = Budget.from_profile(self.profile)
        # Office files become PDFs in batches, one LibreOffice start each (a failure is found again at open)
        await prepare_office([s.path for s in sources if isinstance(s, SourceFile)])
        self.emit("run_start", documents=len(sources))
        if self.target is not None:
            self.target.prepare()
        summary = RunSummary(documents=len(sources), keep_results=self.keep_documents)
        self.last_summary = summary
        slots = asyncio.Semaphore(self.slots_n)
        tasks: set[asyncio.Task[None]] = set()
        self._live = live = {}
        queue = deque(enumerate(sources))  # each input let go once started: a long run keeps none
        del sources

        def done_now(r: DocResult) -> None:
            summary.add(r, n)
            self.emit("doc_done", result=r)

        try:
            while queue:
                n, src = queue.popleft()
                if isinstance(src, InputProblem):  # failed, or unsupported (a file in a folder)
                    done_now(DocResult.of_problem(src))
                    continue
                opened = await self._open(src)
                if isinstance(opened, DocResult):
                    done_now(opened)
                    continue
                info = opened
                plan = self._plan(src, info)
                if self.target is not None:
                    self.target.forget(src.name, alt_name(src))
                src, indices = plan.src, plan.indices
                if plan.status is not None:  # skipped, failed, or updated: the formats it lacked added
                    r = DocResult(name=src.name, path=str(src.path), status=DocStatus(plan.status), error=plan.error)
                    if plan.status == DocStatus.UPDATED and self.target is not None:
                        ctx = render_context(self.options)
                        r = await asyncio.to_thread(formats_added, self.target, r.name, r.path, plan.formats, ctx)
                    done_now(r)
                    continue
                staging = self.target.staging(src.name, self.run_id) if self.target is not None else None
                if staging is not None:
                    try:
                        staging.mkdir(parents=True, exist_ok=True)
                    except OSError as e:  # this document's output cannot be written: it fails alone
                        why = f"cannot write output: {e.strerror or e} ({e.filename or staging})"
                        done_now(DocResult(name=src.name, path=str(src.path), status=DocStatus.FAILED, error=why))
                        continue
                st = live[n] = _DocState(n, src, info, indices, staging, plan.formats, plan.redo)
                self.emit("doc_start", name=src.name, pages=len(indices), path=str(src.path), redo=plan.redo)
                known = self.known_pages(src.name, info.sha256) if self.known_pages else {}
                if plan.keep and self.target is not None:  # the model's pages a rerun keeps, their crops staged
                    kept = await asyncio.to_thread(self.target.kept_pages, src.name, plan.keep, staging, strict=False)
                    known = {**kept[0], **known}
                for i in indices:
                    page = known.get(i)
                    if page is not None and page.index == i and page.status != "failed":
                        st.resumed += 1
                        self._page_done(st, page, resumed=True)
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
            for st in list(live.values()):  # those still being converted
                await st.done.wait()
        except BaseException:
            summary.interrupted = True
            await stop_tasks(tasks)
            raise
        finally:
            # every exit path: count what finished, leave no half-written document behind
            for st in live.values():
                if st.result is None and st.staging is not None:
                    shutil.rmtree(st.staging, ignore_errors=True)
            summary.finish()  # the results in the input order
            summary.elapsed_s = time.perf_counter() - t0
            self.emit("run_done", summary=summary)
        return summary

    async def aclose(self) -> None:
        if self._own_pool:
            self.pool.shutdown()
        if self._own_engine:
            await self.engine.aclose()
        await self.rescue.aclose()

    async def __aenter__(self) -> Converter:
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()
