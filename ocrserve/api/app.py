"""The OCR HTTP API (FastAPI): sync and streaming conversion, persistent jobs, keys, limits, metrics, viewer.

    POST   /v1/convert            multipart `file` (+ `password`) or JSON {filename, content_base64, password};
                                  ?format=json|md|html|txt|pdf|chunks (any registered format: export/formats.py),
                                  ?pages=1-3, ?stream=true (Server-Sent Events)
    POST   /v1/jobs               same input -> 202 {"id"}
    GET    /v1/jobs/{id}          status (queued, running, done, failed) and progress
    GET    /v1/jobs/{id}/result   ?format=json|md|html|txt|chunks (not pdf: a job keeps no source)
    GET    /v1/jobs/{id}/images/{name}, /v1/jobs/{id}/archive   a job's figure crops; its document folder (zip)
    DELETE /v1/jobs/{id}
    POST   /v1/render             a Document (JSON, or multipart `document` + `file` for pdf) in another format;
                                  GET /v1/formats lists them
    GET    /v1/pages/{token}.png  page images for the viewer (tokens come in `page_started` events)
    GET    /v1/figures/{token}.png  figure crops of /v1/convert (its Document links them)
    GET    /healthz, /readyz, /metrics, /docs, /  (the viewer)

This module only builds the app: the lifespan (engine, service, job worker, sweeper), the middleware
(upload size, a newline after every JSON answer, CORS), the routers (`routes/`), and the one mapping of the service's errors
(`errors.py`) to status codes. Finished jobs are kept `job_ttl_s` seconds (default 7 days), then
removed with their result; an expired job answers 404 like one that never existed (see `retention.py`).
"""

from __future__ import annotations

import errno
import json
import logging
import math
import shutil
import sqlite3
from collections.abc import Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import cast

from fastapi import FastAPI, Request
from fastapi.middleware.cors import CORSMiddleware
from fastapi.responses import JSONResponse, Response
from fastapi.staticfiles import StaticFiles

from ocrserve.api import errors as E
from ocrserve.api.auth import Auth, load_keys
from ocrserve.api.deps import Context
from ocrserve.api.jobs import JobStore
from ocrserve.api.limits import BodyLimit, FramingGuard, KeyLimiter
from ocrserve.api.metrics import Metrics
from ocrserve.api.newline import JSONNewline
from ocrserve.api.retention import Sweeper
from ocrserve.api.routes import convert, health, jobs, pages, render, viewer
from ocrserve.api.routes.common import retention_doc
from ocrserve.api.service import Service
from ocrserve.api.worker import JobWorker
from ocrserve.engines import Engine, create_engine
from ocrserve.profiles import load_profile
from ocrserve.settings import Settings, get_settings

log = logging.getLogger(__name__)

# the service's errors -> HTTP status codes (the most specific class first)
STATUS: list[tuple[type[E.ServiceError], int]] = [
    (E.BadInput, 400),
    (E.Unauthorized, 401),
    (E.NotFound, 404),
    (E.SlowUpload, 408),
    (E.Conflict, 409),
    (E.TooLarge, 413),
    (E.TooManyPages, 413),
    (E.Unsupported, 415),
    (E.BadDocument, 422),
    (E.Busy, 429),
]


def status_of(exc: E.ServiceError) -> int:
    return next((code for cls, code in STATUS if isinstance(exc, cls)), 500)


def startup_line(engine_name: str, model: str, data_dir: Path) -> str:
    """What the service says it runs: the engine, and the model only when a model engine reads the pages."""
    model_part = "" if engine_name == "lite" else f", model {model}"
    return f"OCR API: engine {engine_name}{model_part}, data in {data_dir}"


def _counted(store: JobStore, status: str) -> Callable[[], float]:
    """A gauge's value: the jobs in a status, NaN while the store cannot tell (/metrics still answers)."""

    def count() -> float:
        try:
            return float(store.count((status,)))
        except sqlite3.Error:
            return math.nan

    return count


def problem(status: int, detail: str, code: str, headers: dict[str, str] | None = None) -> Response:
    """An error answer as every other: JSON {"detail", "code"} (ending with a newline, as JSONNewline
    makes the others: this one may be sent from outside it)."""
    body = json.dumps({"detail": detail, "code": code}) + "\n"
    return Response(body, status_code=status, media_type="application/json", headers=headers)


def disk_full(exc: BaseException) -> bool:
    """A write refused for want of space: ENOSPC or EDQUOT, or SQLite's SQLITE_FULL ("database or disk is full")."""
    if isinstance(exc, sqlite3.Error):
        return getattr(exc, "sqlite_errorcode", None) == sqlite3.SQLITE_FULL or "disk is full" in str(exc)
    return isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT)


def full_disk(request: Request, exc: BaseException) -> Response:
    """507 Insufficient Storage, as JSON: the service's data disk is full (DELETE of finished jobs frees it)."""
    log.error("data disk full: %s %s: %s", request.method, request.url.path, exc)
    return problem(
        507, "the service's data disk is full; retry later (deleting finished jobs frees space)", "insufficient_storage"
    )


def create_app(settings: Settings | None = None, engine: Engine | str | None = None) -> FastAPI:
    """The API around one engine (an Engine, or a name for create_engine; default from settings)."""
    settings = (settings or get_settings()).for_service()
    auth = Auth(load_keys(settings))
    # no model chosen: the openai engine follows the model its server serves (its preflight, each conversion)
    profile = load_profile(settings.model) if settings.model else None
    store = JobStore(Path(settings.data_dir), ttl_s=settings.job_ttl_s)
    uploads = Path(settings.data_dir) / "uploads"
    shutil.rmtree(uploads, ignore_errors=True)  # leftovers of sync requests of a stopped service
    metrics = Metrics(queue_depth=_counted(store, "queued"), jobs_running=_counted(store, "running"))
    ctx = Context(
        settings=settings,
        auth=auth,
        store=store,
        metrics=metrics,
        uploads=uploads,
        limiter=KeyLimiter(settings.per_key_concurrency, settings.retry_after_s),
    )

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        own = not hasattr(engine, "ocr")
        if own:
            eng = create_engine(engine if isinstance(engine, str) else settings.engine, profile, settings)
        else:
            eng = cast(Engine, engine)  # an engine object handed in (tests, `ocrserve serve --api-port`)
        service = Service(settings, eng, profile)
        service.metrics = metrics
        worker = JobWorker(service, store, settings.job_workers)
        sweeper = Sweeper(store, settings.job_sweep_interval_s, metrics)
        await sweeper.startup()  # before any job runs or request comes: expired jobs and leftovers go
        ctx.service, ctx.worker = service, worker
        if auth.open:
            log.warning(
                "no API keys configured (OCRSERVE_API_KEYS / OCRSERVE_API_KEYS_FILE): the API is open to anyone "
                "who can reach it"
            )
        log.info("%s", startup_line(eng.name, service.profile.name, settings.data_dir))
        worker.start()
        sweeper.start()
        try:
            yield
        finally:
            await sweeper.stop()
            await worker.stop()
            await service.aclose()
            if own:
                await eng.aclose()
            store.close()

    app = FastAPI(
        title="ocrserve OCR API",
        version="1",
        lifespan=lifespan,
        docs_url=None,
        redoc_url=None,
        description="Documents to Markdown, HTML and JSON with Chandra OCR models.\n\n"
        + retention_doc(settings.job_ttl_s),
    )
    app.state.ctx = ctx
    app.state.metrics = metrics
    app.state.store = store
    app.add_middleware(
        BodyLimit,
        limit=settings.max_upload_bytes,
        paths=("/v1/convert", "/v1/jobs", "/v1/render"),
        on_reject=lambda: metrics.rejected.labels(reason="too_large").inc(),
    )
    app.add_middleware(JSONNewline)  # every JSON answer ends with a newline (the 413 above too)
    origins = [o.strip() for o in settings.cors_origins.split(",") if o.strip()]
    if origins:  # outermost: preflight requests are answered before anything else looks at them
        app.add_middleware(
            CORSMiddleware,
            allow_origins=origins,
            allow_methods=["GET", "POST", "DELETE"],
            allow_headers=["Authorization", "Content-Type"],
            expose_headers=["X-OCR-Status", "Location", "Retry-After"],
        )

    app.add_middleware(FramingGuard)  # outermost: an ambiguous request reaches nothing else

    @app.exception_handler(OSError)  # the data disk full: 507, which says so; any other: a JSON 500
    async def _os_error(request: Request, exc: OSError):
        if disk_full(exc):
            return full_disk(request, exc)
        return problem(500, f"internal error: {type(exc).__name__}", "internal")

    @app.exception_handler(sqlite3.Error)
    async def _store_error(request: Request, exc: sqlite3.Error):
        if disk_full(exc):
            return full_disk(request, exc)
        log.error("job store: %s %s: %s: %s", request.method, request.url.path, type(exc).__name__, exc)
        return problem(
            503,
            f"the job store is unavailable ({exc}); retry later",
            "store_unavailable",
            {"Retry-After": str(settings.retry_after_s)},
        )

    @app.exception_handler(Exception)  # anything else: a JSON 500, never a text/plain one (and logged)
    async def _internal(request: Request, exc: Exception):
        return problem(500, f"internal error: {type(exc).__name__}", "internal")

    @app.exception_handler(E.ServiceError)
    async def _service_error(request: Request, exc: E.ServiceError):
        if exc.reason:
            metrics.rejected.labels(reason=exc.reason).inc()
        return JSONResponse(
            {"detail": exc.detail, "code": exc.code}, status_code=status_of(exc), headers=exc.headers or None
        )

    for router in (health.router, viewer.router, pages.router, convert.router, jobs.build(settings), render.router):
        app.include_router(router)
    app.mount("/static", StaticFiles(directory=viewer.STATIC), name="static")
    return app


def create_app_from_env() -> FastAPI:
    """For `uvicorn --factory ocrserve.api.app:create_app_from_env` (settings from OCRSERVE_*)."""
    return create_app(get_settings())
