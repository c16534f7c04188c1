"""The Ray Data stages of a distributed conversion, as plain functions over rows.

documents --open (flat_map, CPU)--> one row per selected page (or one skipped/failed row per document)
          --render (map, CPU)--> + the page PNG
          --engine (map_batches, actors: one engine per GPU / per CPU slot)--> + the raw model answer
          --finish (map, CPU)--> + the parsed Page as JSON and its figure crops; PNG dropped
and the driver assembles documents from the finished rows (ray_convert.py).

Every row carries every column (same types throughout: "" / 0 / -1 for "none"), so blocks from
different stages and documents always share one Arrow schema. The per-page logic mirrors the local
pipeline (pipeline.Converter._page / _ocr) so both produce the same files.

Opening and rendering run in a child process of the Ray worker (isolate.py): a file that crashes
pdfium fails alone, with the local pipeline's reason, and never takes the task (and the other
documents' pages in its block) down with it.
"""

from __future__ import annotations

import logging
import os
import pickle
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from ocrserve.document import Page, PageTimings
from ocrserve.pipeline.page import with_fallback
from ocrserve.engines import Engine, EngineResult, PageInput, create_engine
from ocrserve.ingest.pool import WorkerCrash
from ocrserve.ingest.raster import Budget, DocumentError, open_source, render_page
from ocrserve.ingest.sources import PageSelection
from ocrserve.pipeline.page import finish_page
from ocrserve.profiles import Profile, load_profile
from ocrserve.settings import Settings
from ocrserve.ingest.isolate import isolated, quiet_dead_resource_tracker

log = logging.getLogger(__name__)

# kind: page (a page to convert), skipped (complete output already there), failed (document unreadable)
COLUMNS: dict[str, Any] = {
    "kind": "page", "name": "", "path": "", "abspath": "", "type": "", "sha256": "", "page_count": 0,
    "n_pages": 0, "index": -1, "error": "",
    # render
    "png": b"", "width": 0.0, "height": 0.0, "unit": "pt", "image_width": 0, "image_height": 0, "render_s": 0.0,
    # engine
    "raw": "", "status": "", "engine": "", "attempts": 0, "prompt_tokens": -1, "completion_tokens": -1,
    "finish_reason": "", "model_error": "", "engine_s": 0.0, "has_result": False,
    # finish
    "page_json": "", "figures": b"",
}


def make_row(**values: Any) -> dict[str, Any]:
    unknown = set(values) - set(COLUMNS)
    if unknown:
        raise KeyError(f"unknown row columns: {sorted(unknown)}")
    row = dict(COLUMNS)
    row.update(values)
    return row


@dataclass(frozen=True)
class StageConfig:
    """What the CPU stages need, shipped to the workers."""

    model: Profile  # the Profile itself travels (a profile file need not exist on the workers)
    budget: Budget
    password: str | None = None
    max_image_pixels: int = 200_000_000
    page_filter: PageSelection | None = None
    figures: bool = True
    keep_raw: bool = False


# ------------------------------------------------------------------------------------------ open


def open_doc(doc: dict[str, Any], cfg: StageConfig) -> list[dict[str, Any]]:
    """A document row -> its page rows; one skipped or failed row when there is nothing to convert."""
    base = {"name": doc["name"], "path": doc["path"], "abspath": doc["abspath"]}
    try:
        info = isolated(open_source, doc["abspath"], cfg.password, cfg.max_image_pixels)
    except (DocumentError, WorkerCrash) as e:
        return [make_row(kind="failed", error=str(e), **base)]
    except Exception as e:  # noqa: BLE001 - one bad document never stops the others
        return [make_row(kind="failed", error=f"cannot open: {e!r}", **base)]
    meta = dict(base, type=info.type, sha256=info.sha256, page_count=info.page_count)
    if doc.get("done_sha") and doc["done_sha"] == info.sha256:
        return [make_row(kind="skipped", **meta)]
    indices = list(range(info.page_count))
    if cfg.page_filter is not None:
        indices = cfg.page_filter.indices(info.page_count)
    if not indices:
        return [make_row(kind="failed", error=f"no pages selected (the document has {info.page_count})", **meta)]
    return [make_row(kind="page", n_pages=len(indices), index=i, **meta) for i in indices]


# ---------------------------------------------------------------------------------------- render


def render_row(row: dict[str, Any], cfg: StageConfig) -> dict[str, Any]:
    if row["kind"] != "page":
        return row
    try:
        rp = isolated(render_page, row["abspath"], row["type"], row["index"], cfg.budget, cfg.password,
                      cfg.max_image_pixels)
    except (DocumentError, WorkerCrash) as e:
        return _failed_render(row, f"render: {e}")
    except Exception as e:  # noqa: BLE001
        return _failed_render(row, f"render: {e!r}")
    row.update(png=rp.png, width=rp.width, height=rp.height, unit=rp.unit, image_width=rp.image_width,
               image_height=rp.image_height, render_s=rp.render_s)
    return row


def _failed_render(row: dict[str, Any], error: str) -> dict[str, Any]:
    page = Page(index=row["index"], width=0, height=0, status="failed", error=error)
    row["page_json"] = page.model_dump_json()
    return row


def page_input(row: dict[str, Any], password: str | None) -> PageInput:
    return PageInput(
        doc_id=row["name"], index=row["index"], png=row["png"], width=row["width"], height=row["height"],
        unit=row["unit"], source_path=row["abspath"], source_type=row["type"], password=password,
        render_s=row["render_s"], image_size=(row["image_width"], row["image_height"]),
    )


# ---------------------------------------------------------------------------------------- engine


@dataclass
class EngineSpec:
    """How an engine actor builds its engine. `factory(profile, settings, **options)` overrides `name`."""

    name: str | None
    model: Profile  # the Profile itself travels (a profile file need not exist on the workers)
    settings: Settings
    options: dict[str, Any] = field(default_factory=dict)
    fallback: bool = True
    password: str | None = None
    factory: Callable[..., Engine] | None = None

    def build(self, profile: Profile) -> Engine:
        options = dict(self.options)
        server = options.get("server")
        if isinstance(server, str) and "{node_ip}" in server:
            import ray

            options["server"] = server.replace("{node_ip}", ray.util.get_node_ip_address())
        if self.factory is not None:
            return self.factory(profile, self.settings, **options)
        if self.name == "vllm":
            from ocrserve.engines.vllm import VLLMEngine

            return VLLMEngine(profile, settings=self.settings, **options)
        return create_engine(self.name, profile, self.settings, **options)


class EngineStage:
    """A Ray Data actor holding one engine (and the lite fallback, made when first needed).

    Async: Ray Data runs several batches of an actor concurrently on its event loop, so an HTTP
    engine keeps its `capacity()` requests in flight; engines with `ocr_batch` (in-process vLLM)
    get a whole batch at once.
    """

    def __init__(self, spec: EngineSpec) -> None:
        import asyncio

        self.spec = spec
        self.profile = load_profile(spec.model)
        self.engine = spec.build(self.profile)
        self._fallback_engine: Engine | None = None
        self._sem = asyncio.Semaphore(max(1, int(self.engine.capacity())))
        self._loop: Any = None  # the event loop Ray Data runs __call__ on (engines' clients live there)

    def __del__(self) -> None:
        # Ray Data drops the UDF when the actor exits gracefully (MapWorker.__ray_shutdown__), before
        # Ray kills the actor's child processes: close the engines now, so their worker pools and
        # clients shut down cleanly (no leaked semaphores or resource_tracker warnings).
        self.close()

    def close(self, timeout: float = 60.0) -> None:
        """Close the engine and the fallback engine (aclose); idempotent, never raises."""
        import asyncio
        import threading

        engines = [e for e in (getattr(self, "engine", None), getattr(self, "_fallback_engine", None)) if e is not None]
        if engines:
            quiet_dead_resource_tracker()
        self.engine = self._fallback_engine = None  # type: ignore[assignment]
        loop = getattr(self, "_loop", None)
        for eng in engines:
            try:
                if loop is not None and loop.is_running() and not _on_loop(loop):
                    asyncio.run_coroutine_threadsafe(eng.aclose(), loop).result(timeout)
                else:  # no loop to use (never called, or called from it): a fresh one in a thread
                    t = threading.Thread(target=lambda e=eng: asyncio.run(e.aclose()), daemon=True)
                    t.start()
                    t.join(timeout)
            except Exception:  # noqa: BLE001 - shutting down: log and go on
                log.warning("closing engine %s failed", getattr(eng, "name", eng), exc_info=True)

    async def _fallback(self) -> Engine:
        if self._fallback_engine is None:
            self._fallback_engine = create_engine("lite", self.profile, self.spec.settings)
        return self._fallback_engine

    async def _ocr_one(self, pi: PageInput) -> EngineResult:
        async with self._sem:
            try:
                return await self.engine.ocr(pi)
            except Exception as e:  # noqa: BLE001 - an engine bug must not lose the page
                log.exception("engine %s raised on %s page %d", self.engine.name, pi.doc_id, pi.index + 1)
                return EngineResult(ok=False, engine=self.engine.name, error=f"engine error: {e!r}")

    async def _with_fallback(self, pi: PageInput, res: EngineResult) -> tuple[EngineResult, str, str | None]:
        """(result, status, model error kept for a fallback page): the pipeline's rule."""
        return await with_fallback(res, pi, engine_name=self.engine.name, enabled=self.spec.fallback,
                                   get_fallback=self._fallback)

    async def _results(self, inputs: list[PageInput]) -> list[tuple[EngineResult, float]]:
        import asyncio

        batch = getattr(self.engine, "ocr_batch", None)
        if batch is not None:
            t0 = time.perf_counter()
            try:
                results = await batch(inputs)
            except Exception as e:  # noqa: BLE001
                log.exception("engine %s raised on a batch", self.engine.name)
                results = [EngineResult(ok=False, engine=self.engine.name, error=f"engine error: {e!r}")] * len(inputs)
            dt = (time.perf_counter() - t0) / max(1, len(inputs))
            return [(r, dt) for r in results]

        async def one(pi: PageInput) -> tuple[EngineResult, float]:
            t0 = time.perf_counter()
            r = await self._ocr_one(pi)
            return r, time.perf_counter() - t0

        return list(await asyncio.gather(*(one(pi) for pi in inputs)))

    async def __call__(self, batch):  # pyarrow.Table -> pyarrow.Table
        import asyncio

        import pyarrow as pa

        self._loop = asyncio.get_running_loop()
        rows = batch.to_pylist()
        todo = [i for i, r in enumerate(rows) if r["kind"] == "page" and not r["page_json"]]
        inputs = [page_input(rows[i], self.spec.password) for i in todo]
        firsts = await self._results(inputs)

        async def finish(pi: PageInput, res: EngineResult, dt: float) -> tuple[EngineResult, str, str | None, float]:
            t0 = time.perf_counter()
            res, status, err = await self._with_fallback(pi, res)
            return res, status, err, dt + (time.perf_counter() - t0)

        done = await asyncio.gather(*(finish(pi, r, dt) for pi, (r, dt) in zip(inputs, firsts)))
        for i, (res, status, err, dt) in zip(todo, done):
            rows[i].update(
                has_result=True, raw=res.raw or "", status=status, engine=res.engine or self.engine.name,
                attempts=res.attempts, finish_reason=res.finish_reason or "", model_error=err or "",
                prompt_tokens=-1 if res.prompt_tokens is None else res.prompt_tokens,
                completion_tokens=-1 if res.completion_tokens is None else res.completion_tokens, engine_s=dt,
            )
        return pa.Table.from_pylist(rows, schema=batch.schema)


def _on_loop(loop: Any) -> bool:
    import asyncio

    try:
        return asyncio.get_running_loop() is loop
    except RuntimeError:
        return False


# ---------------------------------------------------------------------------------------- finish


def finish_row(row: dict[str, Any], cfg: StageConfig) -> dict[str, Any]:
    """Parse the raw answer into a Page (figure crops collected as bytes), as pipeline.Converter._page."""
    if row["kind"] != "page" or row["page_json"]:
        row["png"] = b""
        return row
    profile = load_profile(cfg.model)
    status, model_error = row["status"], row["model_error"] or None
    files: dict[str, bytes] = {}
    common = dict(index=row["index"], width=row["width"], height=row["height"], unit=row["unit"])
    if status == "failed":
        page = Page(status="failed", image_width=row["image_width"], image_height=row["image_height"], **common)
    else:
        try:
            with tempfile.TemporaryDirectory(prefix="ocrserve-fig-") as tmp:
                page = finish_page(
                    row["raw"], profile, image_size=(row["image_width"], row["image_height"]),
                    png=row["png"] if cfg.figures else None, staging=tmp if cfg.figures else None,
                    prefix=row["name"].rsplit("/", 1)[-1],
                    truncated=(row["finish_reason"] == "length") if row["finish_reason"] else None, **common,
                )
                for p in sorted(Path(tmp).rglob("*")):
                    if p.is_file():
                        files[p.relative_to(tmp).as_posix()] = p.read_bytes()
        except Exception as e:  # noqa: BLE001 - as the local pipeline: the page fails, the run goes on
            page = Page(status="failed", **common)
            model_error = f"postprocess: {e}"
            status = "failed"
    page.status = status  # type: ignore[assignment]
    page.engine = row["engine"] or None
    page.attempts = row["attempts"]
    page.prompt_tokens = None if row["prompt_tokens"] < 0 else row["prompt_tokens"]
    page.completion_tokens = None if row["completion_tokens"] < 0 else row["completion_tokens"]
    page.error = model_error
    page.timings = PageTimings(render_s=row["render_s"], engine_s=row["engine_s"], parse_s=page.timings.parse_s)
    if cfg.keep_raw:
        page.raw = row["raw"]
    row.update(page_json=page.model_dump_json(), figures=pickle.dumps(files) if files else b"", png=b"", raw="")
    return row


def row_figures(row: dict[str, Any]) -> dict[str, bytes]:
    return pickle.loads(row["figures"]) if row["figures"] else {}


