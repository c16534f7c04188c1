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
(isolate.py), so a file that crashes it fails alone instead of killing the task and its block.
Resumable like the local run: documents whose output is complete for the same source hash are
skipped (rerun with force=True to redo them).

The stages are ray_stages.py's (rows, CPU stages) and ray_engine.py's (the engine actor); joining
the cluster and sizing the engine actors is ray_cluster.py's.
"""

from __future__ import annotations

import logging
import time
import uuid
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from ocrserve.document import Page
from ocrserve.engines import Engine, engine_for
from ocrserve.ingest.raster import Budget, SourceInfo
from ocrserve.ingest.sources import InputProblem, SourceFile, expand_sources, parse_page_ranges
from ocrserve.pipeline.options import ConvertOptions, RayOptions
from ocrserve.pipeline.output import alt_name, render_context
from ocrserve.pipeline.page import assemble_document, document_model
from ocrserve.pipeline.ray_cluster import actor_plan, connect, engine_type
from ocrserve.pipeline.ray_engine import EngineSpec, EngineStage
from ocrserve.pipeline.ray_stages import StageConfig, existing_json, finish_row, open_doc, render_row, row_figures
from ocrserve.pipeline.results import DocResult, DocStatus, Event, RunSummary, document_result, emitter
from ocrserve.pipeline.target import OutputTarget, formats_added
from ocrserve.profiles import load_profile
from ocrserve.settings import Settings, get_settings

log = logging.getLogger(__name__)


@dataclass
class _Doc:
    doc: int
    name: str
    path: str
    meta: dict[str, Any]
    n_pages: int
    pages: dict[int, Page] = field(default_factory=dict)
    files: dict[str, bytes] = field(default_factory=dict)
    resumed: int = 0  # pages kept from the output there (a partial rerun), not converted now


# the Ray options as keyword arguments of run_ray_convert (also accepted inside `ray=RayOptions(...)`)
_RAY_KEYWORDS = {
    "address": "address",
    "engine_actors": "engine_actors",
    "gpus_per_actor": "gpus_per_actor",
    "cpus_per_actor": "cpus_per_actor",
    "ray_batch_size": "batch_size",
    "pages_per_task": "pages_per_task",
    "task_retries": "task_retries",
    "storage_options": "storage_options",
    "ray_progress": "progress",
    "ray_init": "init",
}


def _served_profile(name: str, model: Any, settings: Settings, options: dict[str, Any]) -> Any:
    """The profile checked against the server (an EngineError when it serves another model), or, with none
    chosen, the one it serves: the local run's preflight, before any page is read."""
    import asyncio

    from ocrserve.engines import create_engine

    async def go():
        eng = create_engine(name, model, settings, **options)
        try:
            await eng.preflight()
            return eng.profile
        finally:
            await eng.aclose()

    return asyncio.run(go())


def run_ray_convert(
    inputs: list[str | Path] | str | Path,
    options: ConvertOptions | None = None,
    *,
    engine: str | Callable[..., Engine] | None = None,
    settings: Settings | None = None,
    on_event: Event | None = None,
    keep_results: bool = True,
    **option_values: Any,
) -> RunSummary:
    """Convert files/folders/globs on a Ray cluster; writes OUTPUT/<name>/ like the local run.

    `options` as for the local Converter (ConvertOptions, or the same keyword arguments), with the
    Ray ones in `options.ray` (or as keywords: address, engine_actors, ray_batch_size, ...).
    `engine` is a name (lite, openai, hf, vllm) or a factory `f(profile, settings, **options)`;
    `server` may hold `{node_ip}` (each actor then talks to the server on its own node).
    Input files must be readable at the same path on every node (a shared file system).
    `keep_results=False` (the CLI): the summary keeps counts and the documents it names at the end, and
    the driver lets each document go once written (RunSummary).
    """
    ray_values = {_RAY_KEYWORDS[k]: option_values.pop(k) for k in list(option_values) if k in _RAY_KEYWORDS}
    factory = engine if callable(engine) else None
    options = ConvertOptions.of(options, engine, **option_values)
    if ray_values:
        base = options.ray.model_dump() if options.ray else {}
        options = options.model_copy(update={"ray": RayOptions(**{**base, **ray_values})})
    settings = settings or get_settings()
    opts = options.resolve(settings)
    rayo = opts.ray or RayOptions()
    # resolve() chose the engine; engine_for gives it back as it is (and says so to the type checker)
    name = str(getattr(factory, "name", "custom")) if factory is not None else engine_for(opts.engine, opts.server)
    engine_options = opts.engine_kwargs()
    server = str(engine_options.get("server") or settings.server or "")
    engine_cls = engine_type(name, factory)
    if factory is None and engine_cls.preflight_on_driver and "{node_ip}" not in server:
        profile = _served_profile(name, opts.model, settings, engine_options)  # checked against the server, or its own
    else:
        profile = load_profile(opts.model)
    page_filter = parse_page_ranges(opts.pages)
    emit = emitter(on_event)

    t0 = time.perf_counter()
    if isinstance(inputs, (str, Path)):
        inputs = [inputs]
    target = OutputTarget(opts.output or "ocrserve-out", rayo.storage_options)
    target.begin_run()
    # the local run's names, the same rule; the output folder is not read back as input
    expanded = expand_sources(list(inputs), occupant=target.occupant, exclude=target.local)
    # what could not be read (dangling symlink, loop, unreadable folder) fails, named, with its reason
    problems = [DocResult.of_problem(s) for s in expanded if isinstance(s, InputProblem)]
    sources = [s for s in expanded if isinstance(s, SourceFile)]
    target.prepare()
    run_id = uuid.uuid4().hex[:8]
    # the driver reads what is already written (under each name and its alternative); the open
    # stage decides with the local run's rule (output.plan_document) once the source's hash is known
    doc_rows = []
    for i, s in enumerate(sources):
        here = target.load_existing(s.name)
        # the alternative name matters only when the name already holds an output (choose_name)
        alt = target.load_existing(alt_name(s)) if here is not None else None
        doc_rows.append(
            {
                "doc": i,
                "name": s.name,
                "path": str(s.path),
                "abspath": str(s.path.absolute()),
                "here": existing_json(here),
                "alt": existing_json(alt),
            }
        )
    emit("run_start", documents=len(sources) + len(problems))
    summary = RunSummary(documents=len(doc_rows) + len(problems), keep_results=keep_results)
    for n, r in enumerate(problems):
        summary.add(r, n)
        emit("doc_done", result=r)
    if not doc_rows:
        summary.elapsed_s = time.perf_counter() - t0
        emit("run_done", summary=summary)
        return summary

    started = connect(rayo.address, **rayo.init)
    try:
        import ray

        ctx = ray.data.DataContext.get_current()
        ctx.enable_progress_bars = rayo.progress
        actors, gpus_each, cpus_each = actor_plan(
            engine_cls, rayo.engine_actors, rayo.gpus_per_actor, rayo.cpus_per_actor
        )
        cfg = StageConfig(
            model=profile,
            budget=Budget.from_profile(profile),
            password=opts.password,
            max_image_pixels=settings.max_image_pixels,
            page_filter=page_filter,
            figures=opts.figures,
            keep_raw=opts.keep_raw,
            writes=True,
            force=opts.force,
            formats=opts.formats,
            redo_fallback=engine_cls.model_engine,
        )
        spec = EngineSpec(
            name=None if factory else name,
            model=cfg.model,
            settings=settings,
            options=engine_options,
            fallback=bool(opts.fallback),
            password=opts.password,
            factory=factory,
        )
        batch_size = rayo.batch_size or engine_cls.ray_batch_size
        # Ray core retries a task whose worker died (max_retries); Ray Data restarts a dead engine actor
        # and resubmits its batches (max_restarts / max_task_retries -1, its default, set here explicitly).
        # Newer Ray versions warn that these go through **ray_remote_args; they are still honoured.
        task_args: dict[str, Any] = {"max_retries": rayo.task_retries, "num_cpus": 1}
        actor_args: dict[str, Any] = {"max_restarts": -1, "max_task_retries": -1}
        log.info(
            "ray run %s: %d documents, %d engine actors (%s, %g GPU, %g CPU each)",
            run_id,
            len(doc_rows),
            actors,
            name,
            gpus_each,
            cpus_each,
        )
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=".*ray_remote_args.*")
            ds: ray.data.Dataset = ray.data.from_items(doc_rows, override_num_blocks=max(1, min(len(doc_rows), 1000)))
            # the stage functions take the config bound (partial): Ray ships it with the function
            ds = ds.flat_map(partial(open_doc, cfg=cfg), **task_args)
            # one row per document -> blocks of a few pages, so a long document renders on many workers
            ds = ds.repartition(target_num_rows_per_block=max(1, rayo.pages_per_task))
            ds = ds.map(partial(render_row, cfg=cfg), **task_args)
            ds = ds.map_batches(
                EngineStage,
                fn_constructor_kwargs={"spec": spec},
                batch_size=batch_size,
                batch_format="pyarrow",
                compute=ray.data.ActorPoolStrategy(size=actors),
                num_gpus=gpus_each or None,
                num_cpus=cpus_each,
                **actor_args,
            )
            ds = ds.map(partial(finish_row, cfg=cfg), **task_args)
        model = document_model(name, profile.name, engine_cls.model_engine)
        _collect(ds, doc_rows, target, run_id, name, model, opts, emit, summary, len(problems))
    finally:
        if started:
            import ray

            ray.shutdown()
    summary.finish()
    summary.elapsed_s = time.perf_counter() - t0
    emit("run_done", summary=summary)
    return summary


def _collect(
    ds: Any,  # a ray.data.Dataset (ray is imported only when a run starts)
    doc_rows: list[dict[str, Any]],
    target: OutputTarget,
    run_id: str,
    engine_name: str,
    model_name: str,
    opts: ConvertOptions,
    emit: Callable[..., None],
    summary: RunSummary,
    first: int,
) -> None:
    """Stream the finished rows; write each document when its last page is back, and add its result to the
    summary, numbered by its input (`first` + its row's: a document may be renamed by plan_document). A
    finished document is let go: the driver keeps its number (a page delivered again is dropped)."""
    docs: dict[int, _Doc] = {}
    results: set[int] = set()  # the documents finished

    def done(key: int, r: DocResult) -> None:
        results.add(key)
        docs.pop(key, None)
        emit("doc_done", result=r)
        if not summary.keep_results:
            r.document = None
        summary.add(r, first + key)

    def finish(d: _Doc) -> None:
        done(d.doc, _write(d, target, run_id, engine_name, model_name, opts))

    try:
        for row in ds.iter_rows():
            key = row["doc"]
            if key in results:
                continue  # a page delivered twice (a retried batch): kept once
            if row["kind"] in ("skipped", "failed", "updated"):
                r = DocResult(name=row["name"], path=row["path"], status=row["kind"], error=row["error"] or None)
                if r.status == DocStatus.UPDATED:  # rendered from its JSON here, the one writer
                    formats = tuple(row["formats"].split(","))
                    r = formats_added(target, r.name, r.path, formats, render_context(opts))
                done(key, r)
                continue
            d = docs.get(key)
            if d is None:
                d = docs[key] = _Doc(
                    doc=key, name=row["name"], path=row["path"], meta=dict(row), n_pages=row["n_pages"]
                )
                emit("doc_start", name=d.name, pages=d.n_pages + _kept(row), path=d.path, redo=row["redo"] or None)
                why = _add_kept(d, target, emit)  # the model's pages a rerun keeps from the output there
                if why is not None:
                    done(key, DocResult(name=d.name, path=d.path, status=DocStatus.FAILED, error=why))
                    continue
            idx = row["index"]
            if idx in d.pages:
                continue
            page = Page.model_validate_json(row["page_json"])
            d.pages[idx] = page
            d.files.update(row_figures(row))
            emit("page_done", name=d.name, index=idx, status=page.status, error=page.error, page=page)
            if len(d.pages) == d.n_pages:
                finish(d)
    except KeyboardInterrupt:
        summary.interrupted = True
    if not summary.interrupted:
        # the safety net: every document must be accounted for, never silently dropped
        for doc_row in doc_rows:
            key = doc_row["doc"]
            if key in results:
                continue
            d = docs.get(key)
            got = len(d.pages) if d else 0
            want = d.n_pages if d else "?"
            nm = d.name if d else doc_row["name"]
            log.error("%s: only %s of %s pages came back from the cluster", nm, got, want)
            lost = f"pages lost: {got} of {want} came back from the cluster"
            done(key, DocResult(name=nm, path=doc_row["path"], status=DocStatus.FAILED, error=lost))


def _kept(row: dict[str, Any]) -> int:
    return len([i for i in row["keep"].split(",") if i])


def _add_kept(d: _Doc, target: OutputTarget, emit: Callable[..., None]) -> str | None:
    """The pages the plan keeps from the output there (its row's keep: the model wrote them), added to the
    document with their figure crops as the local run does; why they cannot be, or None."""
    keep = [int(i) for i in d.meta["keep"].split(",") if i]
    if not keep:
        return None
    try:
        pages, files = target.kept_pages(d.name, keep)
    except OSError as e:
        return f"cannot keep the pages the model wrote: {e} (--force converts it whole)"
    d.n_pages += len(pages)
    d.resumed += len(pages)
    d.pages.update(pages)
    d.files.update(files)
    for i, page in sorted(pages.items()):
        emit("page_done", name=d.name, index=i, status=page.status, error=page.error, page=page, resumed=True)
    return None


def _write(
    d: _Doc, target: OutputTarget, run_id: str, engine_name: str, model_name: str, opts: ConvertOptions
) -> DocResult:
    m = d.meta
    info = SourceInfo(type=m["type"], page_count=m["page_count"], sha256=m["sha256"])
    doc = assemble_document(d.path, info, [d.pages[i] for i in sorted(d.pages)], model_name)
    result = document_result(d.name, d.path, doc)
    result.redo = m["redo"] or None
    result.pages_resumed = d.resumed
    formats = tuple(m["formats"].split(",")) if m["formats"] else opts.formats
    try:
        out = target.write(doc, d.name, d.files, run_id, formats=formats, ctx=render_context(opts))
        result.output = Path(out) if target.local is not None else None
    except (OSError, ValueError) as e:
        result.status, result.error = DocStatus.FAILED, f"cannot write output: {e}"
    d.files = {}
    return result
