"""The OCR HTTP API (FastAPI): sync and streaming conversion, persistent jobs, keys, limits, metrics, viewer.

    POST   /v1/convert            multipart `file` or JSON {filename, content_base64}; ?format=json|md|html,
                                  ?pages=1-3, ?stream=true (Server-Sent Events)
    POST   /v1/jobs               same input -> 202 {"id"}
    GET    /v1/jobs/{id}          status (queued, running, done, failed) and progress
    GET    /v1/jobs/{id}/result   ?format=json|md|html
    DELETE /v1/jobs/{id}
    GET    /v1/pages/{token}.png  page images for the viewer (tokens come in `page_started` events)
    GET    /healthz, /readyz, /metrics, /docs, /  (the viewer)

Finished jobs are kept `job_ttl_s` seconds (default 7 days), then removed with their result; an
expired job answers 404 like one that never existed (see `retention.py`).
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import json
import logging
import shutil
import uuid
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path
from typing import Any, Awaitable, Callable, Literal

from fastapi import Depends, FastAPI, HTTPException, Query, Request
from fastapi.responses import FileResponse, JSONResponse, Response, StreamingResponse
from fastapi.staticfiles import StaticFiles
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from pydantic import BaseModel, ValidationError
from starlette.datastructures import UploadFile

from ocrserve.document import Document
from ocrserve.engines import Engine, create_engine
from ocrserve.profiles import load_profile
from ocrserve.render import render_html, render_json, render_markdown
from ocrserve.settings import Settings, get_settings
from ocrserve.api.auth import Auth, load_keys
from ocrserve.api.jobs import Job, JobStore
from ocrserve.api.limits import BodyLimit, KeyLimiter, TooManyRequests
from ocrserve.api.metrics import Metrics
from ocrserve.api.retention import Sweeper
from ocrserve.api.service import Checked, Service, safe_filename
from ocrserve.api.worker import JobWorker

log = logging.getLogger(__name__)

STATIC = Path(__file__).parent / "static"
Format = Literal["json", "md", "html"]

_INPUT_DOC = {
    "requestBody": {
        "required": True,
        "content": {
            "multipart/form-data": {"schema": {
                "type": "object", "required": ["file"],
                "properties": {"file": {"type": "string", "format": "binary", "description": "PDF or image"}},
            }},
            "application/json": {"schema": {
                "type": "object", "required": ["content_base64"],
                "properties": {"filename": {"type": "string"}, "content_base64": {"type": "string"}},
            }},
        },
    }
}


STATUS_HEADER = "X-OCR-Status"
_STATUS_HEADER_DOC = {
    "description": "The document's status (not sent with stream=true; the `done` event has it): `ok` (every "
                   "page by the model), `fallback` (some pages rescued by the lite engine, none failed) or "
                   "`failed` (at least one page failed; the Document's pages say which and why).",
    "schema": {"type": "string", "enum": ["ok", "fallback", "failed"]},
}
_CONVERT_DOC = (
    "Convert one document (PDF or image) and answer with the result.\n\n"
    "A document whose pages failed is still a `200` with the Document, whose failed pages carry their "
    f"error: check the `{STATUS_HEADER}` header (`ok`, `fallback` or `failed`) or the pages' `status`. "
    "A file that cannot be opened at all is a `422`.\n\n"
    "With `stream=true` the answer is a Server-Sent Events stream: `page_started` (page size and image), "
    "`block` (each layout block as soon as its HTML closes in the model's output), `page_reset` (drop the "
    "page's blocks so far: a retried attempt, or a page handed to the fallback), `page_done` (status "
    "ok, fallback or failed, and the page's final blocks), then `done` (the Document and its status) or `error`."
)


def _duration(seconds: float) -> str:
    """7 days, 36 hours, 90 minutes, 1 second: the largest unit that divides the value evenly."""
    s = float(seconds)
    for unit, size in (("day", 86400), ("hour", 3600), ("minute", 60)):
        if s >= size and s % size == 0:
            n = int(s // size)
            return f"{n} {unit}{'s' if n != 1 else ''}"
    return f"{s:g} second{'s' if s != 1 else ''}"


def _retention_doc(ttl_s: float) -> str:
    if ttl_s <= 0:
        return "Finished jobs are kept until they are deleted (OCRSERVE_JOB_TTL_S=0)."
    return (f"Retention: a finished job (done or failed) is kept {_duration(ttl_s)} after it finished "
            "(OCRSERVE_JOB_TTL_S), then removed with its result; its uploaded input is removed as soon as "
            "it finishes. An expired job answers `404`, as a job that never existed or was deleted. "
            "Queued and running jobs never expire.")


class JSONUpload(BaseModel):
    filename: str = "upload"
    content_base64: str


class JobView(Job):
    progress: dict[str, int]


def _render(doc: Document, fmt: str, keep_hf: bool) -> Response:
    if fmt == "md":
        return Response(render_markdown(doc, keep_headers_footers=keep_hf), media_type="text/markdown; charset=utf-8")
    if fmt == "html":
        return Response(render_html(doc), media_type="text/html; charset=utf-8")
    return Response(render_json(doc), media_type="application/json")


async def _read_upload(request: Request, dest_dir: Path, limit: int) -> tuple[Path, str]:
    """The uploaded document written to dest_dir; (path, safe filename). 400/413/415 on bad requests."""
    ctype = request.headers.get("content-type", "").split(";")[0].strip().lower()
    dest_dir.mkdir(parents=True, exist_ok=True)
    if ctype == "multipart/form-data":
        try:
            form = await request.form(max_files=1, max_fields=16)
        except HTTPException:
            raise
        except Exception as e:  # malformed multipart
            raise HTTPException(400, f"cannot read the multipart body: {e}") from None
        try:  # the form's spooled files are closed whatever happens (a large part is a temp file on disk)
            up = form.get("file")
            if not isinstance(up, UploadFile):
                raise HTTPException(400, "send the document as a multipart file field named 'file'")
            name = safe_filename(up.filename)
            path = dest_dir / name
            size = await asyncio.to_thread(_copy, up.file, path)
        finally:
            await form.close()
    elif ctype == "application/json":
        try:
            body = JSONUpload.model_validate_json(await request.body())
        except ValidationError as e:
            raise HTTPException(400, f"JSON body must be {{\"filename\", \"content_base64\"}}: {e.errors()[0]['msg']}") from None
        try:
            data = base64.b64decode(body.content_base64, validate=True)
        except (binascii.Error, ValueError) as e:
            raise HTTPException(400, f"content_base64 is not valid base64: {e}") from None
        name = safe_filename(body.filename)
        path = dest_dir / name
        size = len(data)
        if size <= limit:
            await asyncio.to_thread(path.write_bytes, data)
    else:
        raise HTTPException(415, "send multipart/form-data with a 'file' field, or JSON {filename, content_base64}")
    if size > limit:
        raise HTTPException(413, f"upload too large: {size} bytes; the limit is {limit} bytes")
    if size == 0:
        raise HTTPException(422, f"{name}: the file is empty")
    return path, name


def _copy(src, path: Path) -> int:
    src.seek(0)
    with open(path, "wb") as f:
        shutil.copyfileobj(src, f, 1024 * 1024)
        return f.tell()


def _sse(kind: str, data: Any) -> bytes:
    return f"event: {kind}\ndata: {json.dumps(data, separators=(',', ':'))}\n\n".encode()


class _Hold:
    """What one /v1/convert request holds: a concurrency slot of its key and its upload folder.

    Given back exactly once, synchronously (no await: it must run even under a cancellation).
    """

    def __init__(self, limiter: KeyLimiter, who: str, work: Path) -> None:
        self.limiter, self.who, self.work = limiter, who, work
        self.held = True

    def release(self) -> None:
        if self.held:
            self.held = False
            self.limiter.release(self.who)
            shutil.rmtree(self.work, ignore_errors=True)

    def release_cb(self, _task: asyncio.Task) -> None:
        self.release()


async def _wait_disconnect(request: Request) -> None:
    """Returns when the client has gone away (the body is read already: the next message is the disconnect)."""
    try:
        while (await request.receive())["type"] != "http.disconnect":
            pass
    except Exception:  # noqa: BLE001 - a receive that fails means the connection is gone too
        return


async def _done_unless_gone(task: asyncio.Task, request: Request) -> bool:
    """Wait for task; False (task left running, for the caller to cancel) when the client goes away first."""
    gone = asyncio.create_task(_wait_disconnect(request))
    try:
        await asyncio.wait((task, gone), return_when=asyncio.FIRST_COMPLETED)
    finally:
        gone.cancel()
    return task.done()


class _EventStream(StreamingResponse):
    """The SSE answer of one conversion, which runs in its own task while the response is sent.

    However the response ends (the conversion done, the client gone, the server stopping) the task is
    cancelled, and the hold is given back when the task has stopped: no await stands between a
    cancellation and that (Starlette cancels the response on disconnect, and would cancel such an await too).
    """

    def __init__(self, run: Callable[[Callable[[str, Any], None]], Awaitable[None]], hold: _Hold) -> None:
        self._run, self._hold = run, hold
        self._queue: asyncio.Queue = asyncio.Queue()
        super().__init__(self._events(), media_type="text/event-stream",
                         headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})

    def _sink(self, kind: str, data: Any) -> None:
        self._queue.put_nowait((kind, data))

    async def _convert(self) -> None:
        try:
            await self._run(self._sink)
        finally:
            self._queue.put_nowait(None)

    async def _events(self):
        yield b": ocrserve\n\n"
        while True:
            try:
                item = await asyncio.wait_for(self._queue.get(), timeout=15)
            except TimeoutError:
                yield b": ping\n\n"
                continue
            if item is None:
                return
            yield _sse(*item)

    async def __call__(self, scope, receive, send) -> None:
        task = asyncio.create_task(self._convert())
        task.add_done_callback(self._hold.release_cb)
        try:
            await super().__call__(scope, receive, send)
        finally:
            if not task.done():
                task.cancel()


def create_app(settings: Settings | None = None, engine: Engine | str | None = None) -> FastAPI:
    """The API around one engine (an Engine, or a name for create_engine; default from settings)."""
    settings = settings or get_settings()
    keys = load_keys(settings)
    auth = Auth(keys)
    profile = load_profile(settings.model)
    state: dict[str, Any] = {}

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        eng = engine
        own = not hasattr(eng, "ocr")
        if own:
            eng = create_engine(eng if isinstance(eng, str) else settings.engine, profile, settings)
        service = Service(settings, eng, profile)
        service.metrics = app.state.metrics
        worker = JobWorker(service, store, settings.job_workers)
        sweeper = Sweeper(store, settings.job_sweep_interval_s, app.state.metrics)
        await sweeper.startup()  # before any job runs or request comes: expired jobs and leftovers go
        app.state.service, app.state.worker = service, worker
        if auth.open:
            log.warning("no API keys configured (OCRSERVE_API_KEYS / OCRSERVE_API_KEYS_FILE): the API is open to anyone "
                        "who can reach it")
        log.info("OCR API: engine %s, model %s, data in %s", eng.name, profile.name, settings.data_dir)
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

    store = JobStore(Path(settings.data_dir), ttl_s=settings.job_ttl_s)
    uploads = Path(settings.data_dir) / "uploads"
    shutil.rmtree(uploads, ignore_errors=True)  # leftovers of sync requests of a stopped service
    retention = _retention_doc(settings.job_ttl_s)
    app = FastAPI(title="ocrserve OCR API", version="1", lifespan=lifespan,
                  description="Documents to Markdown, HTML and JSON with Chandra OCR models.\n\n" + retention)
    metrics = Metrics(queue_depth=lambda: store.count(("queued",)), jobs_running=lambda: store.count(("running",)))
    app.state.metrics = metrics
    app.state.store = store
    limiter = KeyLimiter(settings.per_key_concurrency, settings.retry_after_s)
    app.add_middleware(BodyLimit, limit=settings.max_upload_bytes, paths=("/v1/convert", "/v1/jobs"),
                       on_reject=lambda: metrics.rejected.labels(reason="too_large").inc())

    @app.exception_handler(HTTPException)
    async def _http_error(request: Request, exc: HTTPException):
        reason = {413: "too_large", 429: "too_many", 422: "bad_input", 400: "bad_input", 415: "bad_input"}.get(exc.status_code)
        if reason:
            metrics.rejected.labels(reason=reason).inc()
        return JSONResponse({"detail": exc.detail}, status_code=exc.status_code, headers=exc.headers)

    def service() -> Service:
        return app.state.service

    # ------------------------------------------------------------------ health, metrics, viewer
    @app.get("/healthz", tags=["ops"])
    async def healthz() -> dict:
        return {"status": "ok"}

    @app.get("/readyz", tags=["ops"])
    async def readyz():
        ok = await service().ready()
        return JSONResponse({"ready": ok, "engine": service().engine.name}, status_code=200 if ok else 503)

    @app.get("/metrics", tags=["ops"])
    async def metrics_endpoint():
        return Response(generate_latest(metrics.registry), media_type=CONTENT_TYPE_LATEST)

    @app.get("/", include_in_schema=False)
    async def viewer():
        return FileResponse(STATIC / "index.html", media_type="text/html")

    app.mount("/static", StaticFiles(directory=STATIC), name="static")

    @app.get("/v1/pages/{token}.png", tags=["viewer"], response_class=Response)
    async def page_image(token: str):
        png = service().images.get(token)
        if png is None:
            raise HTTPException(404, "no such page image (they are kept for a while only)")
        return Response(png, media_type="image/png", headers={"Cache-Control": "private, max-age=3600"})

    # ------------------------------------------------------------------ convert
    @app.post("/v1/convert", tags=["convert"], openapi_extra=_INPUT_DOC, description=_CONVERT_DOC,
              responses={200: {"description": "Document JSON, Markdown or HTML; with stream=true an SSE stream "
                                              "of page_started, block, page_reset, page_done, done, error events",
                               "headers": {STATUS_HEADER: _STATUS_HEADER_DOC}}})
    async def convert(request: Request, who: str = Depends(auth), format: Format = Query("json"),
                      pages: str | None = Query(None, description="page ranges, e.g. 1-3,7"),
                      stream: bool = Query(False, description="answer with Server-Sent Events")):
        svc = service()
        limiter.acquire(who)
        hold = _Hold(limiter, who, uploads / uuid.uuid4().hex)
        task: asyncio.Task | None = None
        handed_off = False
        try:
            path, name = await _read_upload(request, hold.work, settings.max_upload_bytes)
            checked = await svc.inspect(path, name, pages)
            if stream:
                handed_off = True
                return _EventStream(partial(_stream_events, svc, checked, format), hold)
            task = asyncio.create_task(svc.convert(checked))
            task.add_done_callback(hold.release_cb)  # the slot is the work's: back once the work has stopped
            if not await _done_unless_gone(task, request):
                log.info("client went away: conversion of %s stopped", name)
                return Response(status_code=499)  # nobody reads it; uvicorn drops it
            result, _, _ = task.result()
            if result.document is None:
                raise HTTPException(422, f"{name}: {result.error}")
            resp = _render(result.document, format, settings.keep_headers_footers)
            resp.headers[STATUS_HEADER] = result.document.status
            return resp
        finally:
            if task is not None and not task.done():
                task.cancel()  # no await here: this may run under a cancellation (released by the callback)
            elif not handed_off:
                hold.release()

    async def _stream_events(svc: Service, checked: Checked, fmt: str, sink: Callable[[str, Any], None]) -> None:
        """One streamed conversion: its events into sink, then `done` (or `error`)."""
        try:
            result, interrupted, _ = await svc.convert(checked, sink=sink, stream=True)
            if result.document is not None:
                doc = result.document
                payload: dict[str, Any] = {"status": result.status, "document": json.loads(render_json(doc))}
                if fmt == "md":
                    payload["markdown"] = render_markdown(doc, keep_headers_footers=settings.keep_headers_footers)
                elif fmt == "html":
                    payload["html"] = render_html(doc)
                sink("done", payload)
            elif not interrupted:
                sink("error", {"error": f"{checked.filename}: {result.error}"})
        except Exception as e:  # noqa: BLE001 - reported to the client as an event
            log.exception("streaming conversion of %s", checked.filename)
            metrics.failures.labels(kind="internal").inc()
            sink("error", {"error": f"internal error: {e!r}"})

    # ------------------------------------------------------------------ jobs
    def _view(job: Job) -> dict:
        return JobView(**job.model_dump(), progress={"pages_done": job.pages_done, "pages_total": job.pages_total}
                       ).model_dump()

    def _owned(job_id: str, who: str) -> Job:
        job = store.get(job_id, key=None if auth.open else who)
        if job is None:
            raise HTTPException(404, f"no job {job_id}{gone_hint}")
        return job

    gone_hint = "" if settings.job_ttl_s <= 0 else \
        f" (never made, deleted, or expired: finished jobs are kept {_duration(settings.job_ttl_s)})"
    not_found = {404: {"description": "No such job for this key: never made, deleted"
                                      + (", or expired (past its retention time)" if settings.job_ttl_s > 0 else "")}}

    @app.post("/v1/jobs", status_code=202, tags=["jobs"], openapi_extra=_INPUT_DOC)
    async def submit(request: Request, who: str = Depends(auth),
                     pages: str | None = Query(None, description="page ranges, e.g. 1-3,7")):
        def room() -> None:
            if store.count(key=who) >= settings.per_key_jobs:
                raise TooManyRequests(f"this key has {settings.per_key_jobs} unfinished jobs; retry later",
                                      settings.retry_after_s)
            if store.count() >= settings.max_queued_jobs:
                raise TooManyRequests("the job queue is full; retry later", settings.retry_after_s)

        room()
        svc = service()
        job_id = store.new_id()
        jdir = store.job_dir(job_id)
        try:
            path, name = await _read_upload(request, jdir / "input", settings.max_upload_bytes)
            checked = await svc.inspect(path, name, pages)
            room()
            job = store.add(job_id, who, name, path, pages, checked.selected)
        except BaseException:
            shutil.rmtree(jdir, ignore_errors=True)
            raise
        app.state.worker.notify()
        return JSONResponse({"id": job.id, "status": job.status, "pages_total": job.pages_total},
                            status_code=202, headers={"Location": f"/v1/jobs/{job.id}"})

    @app.get("/v1/jobs/{job_id}", tags=["jobs"], response_model=JobView, responses=not_found,
             description="The job's status (queued, running, done, failed) and progress.\n\n" + retention)
    async def job_status(job_id: str, who: str = Depends(auth)):
        return _view(_owned(job_id, who))

    @app.get("/v1/jobs/{job_id}/result", tags=["jobs"], response_class=Response,
             description="The result of a done job (`409` while it is queued or running, `422` if it failed)."
                         "\n\n" + retention,
             responses={200: {"description": "Document JSON, Markdown or HTML",
                              "headers": {STATUS_HEADER: _STATUS_HEADER_DOC}}, **not_found})
    async def job_result(job_id: str, who: str = Depends(auth), format: Format = Query("json")):
        job = _owned(job_id, who)
        if job.status == "failed":
            raise HTTPException(422, f"job {job_id} failed: {job.error}")
        if job.status != "done":
            raise HTTPException(409, f"job {job_id} is {job.status} ({job.pages_done}/{job.pages_total} pages)")
        def load() -> tuple[str, Document]:  # reading and parsing a large result: off the event loop
            text = store.result_path(job_id).read_text(encoding="utf-8")
            return text, Document.model_validate_json(text)

        try:
            text, doc = await asyncio.to_thread(load)
        except FileNotFoundError:  # removed under us (expired or deleted right now)
            raise HTTPException(404, f"no job {job_id}{gone_hint}") from None
        resp = Response(text, media_type="application/json") if format == "json" else \
            _render(doc, format, settings.keep_headers_footers)
        resp.headers[STATUS_HEADER] = doc.status
        return resp

    @app.delete("/v1/jobs/{job_id}", tags=["jobs"], responses=not_found,
                description="Delete a job: a running one is stopped; its files go at once.")
    async def job_delete(job_id: str, who: str = Depends(auth)):
        _owned(job_id, who)
        app.state.worker.cancel(job_id)
        store.delete(job_id)
        return {"id": job_id, "deleted": True}

    return app


def create_app_from_env() -> FastAPI:
    """For `uvicorn --factory ocrserve.api.app:create_app_from_env` (settings from OCRSERVE_*)."""
    return create_app(get_settings())
