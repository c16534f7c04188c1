"""`ocrserve convert --ray`: the same conversion on a Ray cluster, built on Ray Data.

    documents -> open (CPU tasks) -> pages -> render (CPU tasks, PNG bytes in rows)
              -> engine (an actor pool: one engine per GPU, or CPU actors for `lite`)
              -> parse + figure crops (CPU tasks) -> the driver assembles and writes each document
                 as soon as its last page is back (local folder or any fsspec URL).

Ray does all the distribution: Ray Data streams the rows with backpressure, retries the tasks of
a dead worker (`task_retries`) and restarts a dead engine actor and reruns its batch
(max_restarts / max_task_retries = -1), so the pages of a killed worker are redone. The driver
keeps a page once (by document and index), and a document whose pages did not all come back is
reported failed, never written as complete. pdfium runs in a child process of each worker
(isolate.py), so a file that crashes it fails alone instead of killing the task and its block. Resumable like the local run: documents whose output
is complete for the same source hash are skipped (rerun with force=True to redo them).
"""

from __future__ import annotations

import logging
import time
import uuid
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from ocrserve.document import Document, Page, Source
from ocrserve.engines import Engine, EngineError
from ocrserve.ingest.raster import Budget
from ocrserve.ingest.sources import InputProblem, expand_sources, parse_page_ranges
from ocrserve.pipeline.local import DocResult, RunSummary
from ocrserve.profiles import load_profile
from ocrserve.settings import Settings, get_settings
from ocrserve.pipeline.target import OutputTarget
from ocrserve.pipeline.ray_stages import EngineSpec, EngineStage, StageConfig, finish_row, open_doc, render_row, row_figures

log = logging.getLogger(__name__)

Event = Callable[[str, dict[str, Any]], None]
GPU_ENGINES = ("vllm", "openai", "hf")


class RayConvertError(ValueError):
    """The Ray run cannot start (no Ray installed, cluster not reachable, bad option)."""


@dataclass
class _Doc:
    name: str
    path: str
    meta: dict[str, Any]
    n_pages: int
    pages: dict[int, Page] = field(default_factory=dict)
    files: dict[str, bytes] = field(default_factory=dict)
    result: DocResult | None = None


def connect(address: str | None, **init_kwargs: Any) -> bool:
    """Join a Ray cluster; True when this call started Ray (and so should shut it down).

    address: None or "auto" -> the running cluster (RAY_ADDRESS, or one started on this machine
    with `ray start`); "local" -> a fresh single-machine instance; anything else (ray://host:10001,
    host:6379) -> that cluster. A Ray instance this process already joined is used as is.
    """
    try:
        import ray
    except ImportError:
        raise RayConvertError("--ray needs the [ray] extra (Ray is not installed): pip install '.[ray]' "
                              "(in a clone of ocrserve; it is not on PyPI)") from None
    if ray.is_initialized():
        return False
    init_kwargs.setdefault("include_dashboard", False)
    init_kwargs.setdefault("log_to_driver", True)
    addr = None if address in (None, "", "auto") else address
    try:
        if addr is None:
            try:
                ray.init(address="auto", **init_kwargs)
            except ConnectionError:
                if address == "auto":
                    raise
                ray.init(**init_kwargs)
        else:
            ray.init(address=addr, **init_kwargs)
    except ConnectionError as e:
        raise RayConvertError(f"cannot reach the Ray cluster at {address!r}: {e}") from None
    return True


def _resolve_engine(engine: str | Callable[..., Engine] | None, server: str | None, settings: Settings) -> tuple[str, Callable | None]:
    if callable(engine):
        return str(getattr(engine, "name", "custom")), engine
    name = engine or settings.engine
    if name is None:
        name = "openai" if (server or settings.server) else "lite"
    if name not in ("lite", "openai", "hf", "vllm"):
        raise EngineError(f"unknown engine {name!r}: use one of lite, openai, hf, vllm")
    return name, None


def _actor_plan(name: str, engine_actors: int | None, gpus_per_actor: float | None,
                cpus_per_actor: float | None) -> tuple[int, float, float]:
    """(actors, GPUs each, CPUs each): one engine per GPU when the cluster has GPUs."""
    import ray

    res = ray.cluster_resources()
    gpus, cpus = float(res.get("GPU", 0)), float(res.get("CPU", 1))
    if gpus_per_actor is None:
        gpus_per_actor = 1.0 if (gpus >= 1 and name in GPU_ENGINES) else 0.0
    if gpus_per_actor and gpus < gpus_per_actor:
        raise RayConvertError(f"the cluster has {gpus:g} GPUs, fewer than the {gpus_per_actor:g} each engine actor asks for")
    if cpus_per_actor is None:
        cpus_per_actor = 1.0
    if engine_actors is None:
        if gpus_per_actor:
            engine_actors = max(1, int(gpus // gpus_per_actor))
        elif name == "lite":
            engine_actors = max(1, int(cpus // 2))  # leave half the CPUs to rendering and parsing
        else:
            engine_actors = 1  # an HTTP engine without GPUs: one actor keeps capacity() requests in flight
    if engine_actors < 1:
        raise RayConvertError(f"engine_actors must be at least 1, got {engine_actors}")
    return engine_actors, gpus_per_actor, cpus_per_actor


def run_ray_convert(
    inputs: list[str | Path] | str | Path,
    *,
    address: str | None = None,
    output: str | Path = "ocrserve-out",
    engine: str | Callable[..., Engine] | None = None,
    model: str | None = None,
    server: str | None = None,
    pages: str | list[int] | None = None,
    password: str | None = None,
    force: bool = False,
    fallback: bool | None = None,
    keep_headers_footers: bool | None = None,
    figures: bool = True,
    keep_raw: bool = False,
    concurrency: int | None = None,
    settings: Settings | None = None,
    on_event: Event | None = None,
    engine_actors: int | None = None,
    gpus_per_actor: float | None = None,
    cpus_per_actor: float | None = None,
    ray_batch_size: int | None = None,
    pages_per_task: int = 4,
    task_retries: int = 3,
    storage_options: dict | None = None,
    ray_progress: bool = True,
    ray_init: dict[str, Any] | None = None,
    **engine_options: Any,
) -> RunSummary:
    """Convert files/folders/globs on a Ray cluster; writes OUTPUT/<name>/ like the local run.

    `engine` is a name (lite, openai, hf, vllm) or a factory `f(profile, settings, **options)`;
    `server` may hold `{node_ip}` (each actor then talks to the server on its own node).
    Input files must be readable at the same path on every node (a shared file system).
    """
    settings = settings or get_settings()
    profile = load_profile(model or settings.model)
    name, factory = _resolve_engine(engine, server, settings)
    if server is not None:
        engine_options["server"] = server
    if concurrency:
        engine_options["concurrency"] = concurrency
    page_filter = parse_page_ranges(pages)
    keep_hf = settings.keep_headers_footers if keep_headers_footers is None else keep_headers_footers

    def emit(kind: str, **data: Any) -> None:
        if on_event:
            try:
                on_event(kind, data)
            except Exception:  # noqa: BLE001 - a progress display never breaks a run
                log.exception("event handler failed")

    t0 = time.perf_counter()
    if isinstance(inputs, (str, Path)):
        inputs = [inputs]
    sources = expand_sources(list(inputs))
    # what could not be read (dangling symlink, loop, unreadable folder) fails, named, with its reason
    problems = [DocResult(name=s.name, path=str(s.path), status="failed", error=s.reason)
                for s in sources if isinstance(s, InputProblem)]
    sources = [s for s in sources if not isinstance(s, InputProblem)]
    target = OutputTarget(output, storage_options)
    target.prepare()
    run_id = uuid.uuid4().hex[:8]
    doc_rows = [
        {"name": s.name, "path": str(s.path), "abspath": str(s.path.absolute()),
         "done_sha": "" if force else (target.done_sha(s.name) or "")}
        for s in sources
    ]
    emit("run_start", documents=len(sources) + len(problems))
    summary = RunSummary(results=list(problems))
    for r in problems:
        emit("doc_done", result=r)
    if not doc_rows:
        summary.elapsed_s = time.perf_counter() - t0
        emit("run_done", summary=summary)
        return summary

    started = connect(address, **(ray_init or {}))
    try:
        import ray

        ctx = ray.data.DataContext.get_current()
        ctx.enable_progress_bars = ray_progress
        actors, gpus_each, cpus_each = _actor_plan(name, engine_actors, gpus_per_actor, cpus_per_actor)
        cfg = StageConfig(model=profile, budget=Budget.from_profile(profile),
                          password=password, max_image_pixels=settings.max_image_pixels, page_filter=page_filter,
                          figures=figures, keep_raw=keep_raw)
        spec = EngineSpec(name=None if factory else name, model=cfg.model, settings=settings, options=engine_options,
                          fallback=settings.fallback if fallback is None else fallback, password=password,
                          factory=factory)
        batch_size = ray_batch_size or (64 if name == "vllm" else 8)
        # Ray core retries a task whose worker died (max_retries); Ray Data restarts a dead engine actor
        # and resubmits its batches (max_restarts / max_task_retries -1, its default, set here explicitly).
        # Newer Ray versions warn that these go through **ray_remote_args; they are still honoured.
        task_args = {"max_retries": task_retries, "num_cpus": 1}
        actor_args: dict[str, Any] = {"max_restarts": -1, "max_task_retries": -1}
        log.info("ray run %s: %d documents, %d engine actors (%s, %g GPU, %g CPU each)", run_id, len(doc_rows),
                 actors, name, gpus_each, cpus_each)
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=".*ray_remote_args.*")
            ds = ray.data.from_items(doc_rows, override_num_blocks=max(1, min(len(doc_rows), 1000)))
            ds = ds.flat_map(open_doc, fn_kwargs={"cfg": cfg}, **task_args)
            # one row per document -> blocks of a few pages, so a long document renders on many workers
            ds = ds.repartition(target_num_rows_per_block=max(1, pages_per_task))
            ds = ds.map(render_row, fn_kwargs={"cfg": cfg}, **task_args)
            ds = ds.map_batches(
                EngineStage, fn_constructor_kwargs={"spec": spec}, batch_size=batch_size, batch_format="pyarrow",
                compute=ray.data.ActorPoolStrategy(size=actors), num_gpus=gpus_each or None, num_cpus=cpus_each,
                **actor_args,
            )
            ds = ds.map(finish_row, fn_kwargs={"cfg": cfg}, **task_args)
        summary.results = problems + _collect(ds, doc_rows, target, run_id, name, profile.name, keep_hf, emit, summary)
    finally:
        if started:
            import ray

            ray.shutdown()
    order = {r["name"]: i for i, r in enumerate(doc_rows)}
    summary.results.sort(key=lambda r: order.get(r.name, 0))
    summary.elapsed_s = time.perf_counter() - t0
    emit("run_done", summary=summary)
    return summary


def _collect(ds, doc_rows: list[dict[str, Any]], target: OutputTarget, run_id: str, engine_name: str,
             model_name: str, keep_hf: bool, emit, summary: RunSummary) -> list[DocResult]:
    """Stream the finished rows; write each document when its last page is back."""
    docs: dict[str, _Doc] = {}
    results: dict[str, DocResult] = {}

    def finish(d: _Doc) -> None:
        results[d.name] = d.result = _write(d, target, run_id, engine_name, model_name, keep_hf)
        emit("doc_done", result=d.result)

    try:
        for row in ds.iter_rows():
            nm = row["name"]
            if nm in results:
                continue  # a page delivered twice (a retried batch): kept once
            if row["kind"] in ("skipped", "failed"):
                r = DocResult(name=nm, path=row["path"], status=row["kind"], error=row["error"] or None)
                results[nm] = r
                emit("doc_done", result=r)
                continue
            d = docs.get(nm)
            if d is None:
                d = docs[nm] = _Doc(name=nm, path=row["path"], meta=dict(row), n_pages=row["n_pages"])
                emit("doc_start", name=nm, pages=d.n_pages)
            idx = row["index"]
            if idx in d.pages:
                continue
            page = Page.model_validate_json(row["page_json"])
            d.pages[idx] = page
            d.files.update(row_figures(row))
            emit("page_done", name=nm, index=idx, status=page.status, error=page.error)
            if len(d.pages) == d.n_pages:
                finish(d)
    except KeyboardInterrupt:
        summary.interrupted = True
    if not summary.interrupted:
        # the safety net: every document must be accounted for, never silently dropped
        for r in doc_rows:
            nm = r["name"]
            if nm in results:
                continue
            d = docs.get(nm)
            got = len(d.pages) if d else 0
            want = d.n_pages if d else "?"
            log.error("%s: only %s of %s pages came back from the cluster", nm, got, want)
            results[nm] = DocResult(name=nm, path=r["path"], status="failed",
                                    error=f"pages lost: {got} of {want} came back from the cluster")
            emit("doc_done", result=results[nm])
    return list(results.values())


def _write(d: _Doc, target: OutputTarget, run_id: str, engine_name: str, model_name: str, keep_hf: bool) -> DocResult:
    pages = [d.pages[i] for i in sorted(d.pages)]
    m = d.meta
    doc = Document(
        source=Source(path=d.path, sha256=m["sha256"], type=m["type"], page_count=m["page_count"]),
        model=model_name if engine_name != "lite" else "lite",
        pages=pages,
    )
    n_failed = sum(p.status == "failed" for p in pages)
    n_fb = sum(p.status == "fallback" for p in pages)
    result = DocResult(
        name=d.name, path=d.path, status=doc.status, document=doc, pages=len(pages), pages_failed=n_failed,
        pages_fallback=n_fb,
        error="; ".join(f"page {p.index + 1}: {p.error}" for p in pages if p.status == "failed")[:2000] or None,
    )
    try:
        out = target.write(doc, d.name, d.files, run_id, keep_headers_footers=keep_hf)
        result.output = Path(out) if target.local is not None else None
    except (OSError, ValueError) as e:
        result.status, result.error = "failed", f"cannot write output: {e}"
    d.files = {}
    return result
