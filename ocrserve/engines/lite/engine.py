"""The embedded engine `lite`: the PDF text layer where it is usable, RapidOCR where it is not.

No GPU, no weights to download (the `rapidocr` wheel ships its ONNX models; onnxruntime on the
CPU). Lines become layout blocks (ocrserve.engines.lite.layout) and the answer is Chandra's raw HTML
layout-block form, boxes in the profile's scale and format, so parsing and rendering are shared
with the model engines. Also the fallback for pages a model engine gives up on (`lite_raw_for`).

pypdfium2 is not thread-safe and OCR is CPU-bound: pages go to a bounded set of worker processes
(fork on Linux, else the platform's default), each with its own pdfium state and one RapidOCR instance
created on first use. Each worker runs one page at a time, so a page that hangs past `timeout` (or
whose caller gives up) is stopped by killing its own worker, which a fresh one replaces; a page that
crashes its worker fails alone. The other pages never notice.
"""

from __future__ import annotations

import asyncio
import concurrent.futures as cf
import logging
import math
import multiprocessing as mp
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from PIL import Image

from ocrserve.engines.base import DeltaCallback, Engine, EngineError, EngineResult, PageInput
from ocrserve.engines.lite.grid import scaled
from ocrserve.engines.lite.layout import blocks_to_raw, build_blocks
from ocrserve.engines.lite.ocrgeom import upright_ocr
from ocrserve.engines.lite.options import LiteEngineOptions, default_workers
from ocrserve.engines.lite.rapid import _worker_init, ocr_lines
from ocrserve.engines.lite.running import forget, running_lines
from ocrserve.engines.registry import register_engine
from ocrserve.ingest.pdf.chars import turn_box
from ocrserve.ingest.pdf.document import PDFIUM_LOCK, on_close, open_pdf
from ocrserve.ingest.pdf.textlayer import Line, analyze_page
from ocrserve.ingest.pool import (
    ResilientPool,
    WorkerCrash,
    WorkerTimeout,
    kill_workers,
    retire,
    usable_cpus,
    widen_pipes,
    worker_processes,
)
from ocrserve.profiles import Profile, load_profile

log = logging.getLogger(__name__)

OCR_LONG_SIDE = 1700  # pixels of the long side of a page rendered for OCR (~150 dpi on Letter)
OCR_MAX_SCALE = 4.0  # at most 288 dpi for tiny pages


# ---------------------------------------------------------------- worker side


def _open_pdf(path: str, password: str | None):
    """The source PDF, as the text layer reads it (its own documents: the renderer flattens its pages)."""
    on_close("text", forget)  # a closed document's cached header/footer bands go with it
    return open_pdf(path, password, cache="text")


@dataclass
class LiteOptions:
    bbox_scale: int = 1024
    bbox_format: str = "list"
    ocr: str = "auto"  # auto | always | never (never: text layer only, empty page if none)
    trust_invisible: bool = True  # use an earlier invisible OCR layer when it reads like text


def page_raw(task: dict) -> dict:
    """One page -> raw layout-block HTML (runs in a worker process, or in-process under a lock)."""
    t0 = time.perf_counter()
    opts = LiteOptions(**task["options"])
    info: dict[str, Any] = {}
    running: frozenset[str] = frozenset()
    if task.get("source_type") == "pdf" and task.get("source_path"):
        doc = _open_pdf(task["source_path"], task.get("password"))
        running = running_lines(doc, task["index"])
        page = doc[task["index"]]
        report = analyze_page(page, trust_invisible=opts.trust_invisible)
        width, height, rotation = report.width, report.height, report.rotation
        verdict = report.verdict
        if opts.ocr == "always":
            verdict = "ocr_page"
        elif opts.ocr == "never" and verdict != "text":
            verdict = "text"
        info.update(verdict=verdict, reason=report.reason)
        lines: list[Line] = list(report.lines) if verdict != "ocr_page" else []
        figures: list[tuple[float, float, float, float]] = []
        if verdict in ("ocr_page", "ocr_regions"):
            scale = min(max(OCR_LONG_SIDE / max(width, height, 1.0), 1.0), OCR_MAX_SCALE)
            # the turn that made the text upright (pdfium turns clockwise)
            rendered = page.render(scale=scale, rotation=(360 - rotation) % 360).to_pil()
            if verdict == "ocr_page":
                if rotation:  # rendered upright already
                    found = ocr_lines(rendered)
                else:  # a scan may stand sideways
                    found, rotation = upright_ocr(rendered, ocr_lines)
                    if rotation in (90, 270):
                        width, height = height, width
                lines = [scaled(l, 1 / scale, 0, 0) for l in found]
            else:
                for x0, y0, x1, y1 in report.ocr_regions:
                    box = (int(x0 * scale), int(y0 * scale), int(math.ceil(x1 * scale)), int(math.ceil(y1 * scale)))
                    found = ocr_lines(rendered.crop(box)) if box[2] - box[0] > 8 and box[3] - box[1] > 8 else []
                    found = [l for l in found if l.score >= 0.7]
                    if found:
                        lines += [scaled(l, 1 / scale, x0, y0) for l in found]
                    else:
                        figures.append((x0, y0, x1, y1))
        page.close()
        ocr = verdict == "ocr_page"
    else:
        image: Image.Image = task["image"]
        lines, rotation = upright_ocr(image, ocr_lines)
        width, height = float(image.width), float(image.height)
        if rotation in (90, 270):  # (a half turn keeps the size)
            width, height = height, width
        figures, ocr = [], True
        info.update(verdict="ocr_page", reason="image")
    blocks = build_blocks(lines, width, height, figures=figures, ocr=ocr, running=running)
    if rotation:  # boxes back onto the page as displayed (the pipeline crops figures from it)
        for b in blocks:
            b.box = turn_box(b.box, width, height, (360 - rotation) % 360)
        if rotation in (90, 270):
            width, height = height, width
        info["rotation"] = rotation
    raw = blocks_to_raw(blocks, width, height, opts.bbox_scale, opts.bbox_format)
    info["elapsed_s"] = time.perf_counter() - t0
    return {"raw": raw, **info}


# ---------------------------------------------------------------- engine side


def _task(page: PageInput, options: dict) -> dict:
    task: dict[str, Any] = {
        "source_type": page.source_type,
        "source_path": page.source_path,
        "index": page.index,
        "password": page.password,
        "options": options,
    }
    if not (page.source_type == "pdf" and page.source_path):
        task["image"] = page.image
    return task


def _options(profile: Profile, options: dict) -> dict:
    ocr = str(options.get("ocr", "auto"))
    if ocr not in ("auto", "always", "never"):
        raise EngineError(f"lite option ocr={ocr!r}: use auto, always or never")
    return {
        "bbox_scale": int(profile.bbox_scale),
        "bbox_format": profile.bbox_format,
        "ocr": ocr,
        "trust_invisible": bool(options.get("trust_invisible", True)),
    }


def lite_raw_for(page: PageInput, profile: Profile | str | None = None, **options) -> str:
    """Raw layout-block HTML for one page, computed in this process (the pipeline's fallback).

    Serialised by a lock: pdfium must not run on two threads of a process at once.
    """
    prof = load_profile(profile)
    with PDFIUM_LOCK:
        return page_raw(_task(page, _options(prof, options)))["raw"]


class _Worker:
    """One worker process, one page at a time (a single-process executor): it can be killed alone."""

    def __init__(self, ctx, initializer, initargs) -> None:
        self.executor = cf.ProcessPoolExecutor(
            max_workers=1, mp_context=ctx, initializer=initializer, initargs=initargs
        )
        widen_pipes(self.executor)  # the page's PNG in one write

    def kill(self) -> None:
        """SIGKILL the process now; the executor reaps it in the background."""
        kill_workers(self.executor)
        retire(self.executor)

    def kill_and_wait(self) -> None:
        """Kill the process and wait until it is gone (blocking: run it in a thread)."""
        procs = worker_processes(self.executor)
        self.kill()
        for proc in procs:
            try:
                proc.join(10)
            except (OSError, ValueError):
                pass

    def close(self, wait: bool) -> None:
        if wait:
            self.executor.shutdown(wait=True, cancel_futures=True)
        else:
            retire(self.executor)


@register_engine
class LiteEngine(Engine):
    """Engine `lite`: text layer + RapidOCR on the CPU, pages in worker processes (one page each at a time)."""

    name = "lite"
    Options = LiteEngineOptions
    cpu_bound = True  # Ray: an actor per two CPUs
    model_engine = False  # no model: it is the fallback itself, never wrapped in one

    def __init__(self, profile: Profile | str | None = None, options: LiteEngineOptions | None = None, **values):
        o: LiteEngineOptions = self.options_of(options, values)
        self.profile = load_profile(profile)
        self.workers = default_workers(o.workers)
        self.warm = bool(o.warm)
        self.timeout = float(o.timeout or 600.0)
        self.mp_start = o.mp_start
        self.options = _options(self.profile, {"ocr": o.ocr, "trust_invisible": o.trust_invisible})
        self._lock = threading.Lock()
        self._idle: list[_Worker] = []  # started workers waiting for a page
        self._live: set[_Worker] = set()  # every worker not yet closed (idle or running a page)
        self._gate: tuple[asyncio.AbstractEventLoop, asyncio.Semaphore] | None = None
        self._pool: ResilientPool | None = None  # a run's pool, shared with its rendering (use_pool)

    def pool_workers(self) -> tuple[int, Callable[..., None], tuple]:
        """`workers` processes, each with RapidOCR's threads (the CPUs shared by the workers), warmed or not."""
        return self.workers, _worker_init, (max(1, usable_cpus() // self.workers), self.warm)

    def use_pool(self, pool: ResilientPool) -> None:
        """Pages go to `pool` (a run's, made with pool_workers' initializer; the run closes it), not to workers
        of the engine's own: a hanging page is stopped by the pool (its processes killed, the pages in it
        tried again alone), after `timeout` seconds."""
        self._pool = pool

    def _new_worker(self) -> _Worker:
        from ocrserve.ingest.pool import _worker_init as _guard
        from ocrserve.ingest.pool import default_start_method

        # fork on Linux like the render pool: a user's script needs no __main__ guard (the parent never
        # loads RapidOCR; each worker loads its own); workers die with the parent
        start = self.mp_start or default_start_method()
        _, init, args = self.pool_workers()
        return _Worker(mp.get_context(start), _guard, (init, args))

    def _take(self) -> _Worker:
        with self._lock:
            if self._idle:
                return self._idle.pop()
            worker = self._new_worker()
            self._live.add(worker)
            return worker

    def _give_back(self, worker: _Worker) -> None:
        with self._lock:
            if worker in self._live and len(self._idle) < self.workers:
                self._idle.append(worker)
                return
            self._live.discard(worker)
        worker.close(wait=False)

    def _drop(self, worker: _Worker) -> None:
        with self._lock:
            self._live.discard(worker)
            if worker in self._idle:
                self._idle.remove(worker)

    def _semaphore(self) -> asyncio.Semaphore:
        """At most `workers` pages running at once (per event loop; the workers are shared)."""
        loop = asyncio.get_running_loop()
        with self._lock:
            if self._gate is None or self._gate[0] is not loop:
                self._gate = (loop, asyncio.Semaphore(self.workers))
            return self._gate[1]

    def capacity(self) -> int:
        return self.workers * 2

    async def ocr(self, page: PageInput, *, on_delta: DeltaCallback | None = None) -> EngineResult:
        t0 = time.perf_counter()
        try:
            task = _task(page, self.options)
        except Exception as exc:  # noqa: BLE001 - engines never raise for a page
            return self._fail(page, f"{type(exc).__name__}: {exc}", t0)
        async with self._semaphore():
            if self._pool is not None:
                try:
                    out = await self._pool.run_within(self.timeout, page_raw, task)
                except WorkerTimeout:  # it hung twice (the second time alone)
                    why = f"lite timed out after {self.timeout:g} s on this page (twice); its worker process was killed"
                    return self._fail(page, why, t0)
                except WorkerCrash:  # it took its worker down twice
                    return self._fail(page, "lite worker died on this page (twice)", t0)
                except Exception as exc:  # noqa: BLE001 - the page failed
                    return self._fail(page, f"{type(exc).__name__}: {exc}", t0)
                return await self._answer(out, t0, on_delta)
            worker = self._take()
            try:
                fut = worker.executor.submit(page_raw, task)
                out = await asyncio.wait_for(asyncio.wrap_future(fut), timeout=self.timeout)
            except TimeoutError:
                self._drop(worker)
                await asyncio.get_running_loop().run_in_executor(None, worker.kill_and_wait)
                return self._fail(
                    page,
                    f"lite timed out after {self.timeout:g} s on this page; its worker process was killed and replaced",
                    t0,
                )
            except asyncio.CancelledError:  # the caller gave up: stop the work, free the slot
                self._drop(worker)
                worker.kill()
                raise
            except cf.process.BrokenProcessPool as exc:  # this page took its worker down
                self._drop(worker)
                worker.close(wait=False)
                return self._fail(page, f"lite worker died on this page: {exc}", t0)
            except Exception as exc:  # noqa: BLE001 - the page failed, the worker is fine
                self._give_back(worker)
                return self._fail(page, f"{type(exc).__name__}: {exc}", t0)
            self._give_back(worker)
        return await self._answer(out, t0, on_delta)

    async def _answer(self, out: dict, t0: float, on_delta: DeltaCallback | None) -> EngineResult:
        raw = out.pop("raw")
        if on_delta is not None and raw:
            res = on_delta(raw)
            if asyncio.iscoroutine(res):
                await res
        return EngineResult(
            raw=raw, ok=True, engine=self.name, finish_reason="stop", elapsed_s=time.perf_counter() - t0, extra=out
        )

    def _fail(self, page: PageInput, error: str, t0: float) -> EngineResult:
        log.warning("lite failed on page %s of %s: %s", page.index + 1, page.source_path or page.doc_id, error)
        return EngineResult(
            raw="", ok=False, engine=self.name, finish_reason="error", error=error, elapsed_s=time.perf_counter() - t0
        )

    def _close_all(self) -> list[_Worker]:
        with self._lock:
            workers, self._live, self._idle = list(self._live), set(), []
        return workers

    async def aclose(self) -> None:
        workers = self._close_all()
        if workers:

            def close_all() -> None:
                for w in workers:
                    w.close(wait=True)

            await asyncio.get_running_loop().run_in_executor(None, close_all)

    def close(self) -> None:
        for worker in self._close_all():
            worker.close(wait=False)
