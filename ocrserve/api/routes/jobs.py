"""/v1/jobs: persistent asynchronous conversions (submit, status, result, its figures and the document
folder as a zip, delete)."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path, PurePosixPath
from typing import Any

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import FileResponse, JSONResponse, Response
from starlette.background import BackgroundTask

from ocrserve.api.deps import Context, caller, context
from ocrserve.api.errors import BadDocument, BadInput, Busy, Conflict, NotFound, TooLarge, shorten
from ocrserve.api.figures import build_archive, image_path, job_links
from ocrserve.api.jobs import Job
from ocrserve.api.routes.common import (
    INPUT_DOC,
    STATUS_HEADER,
    STATUS_HEADER_DOC,
    FormatQuery,
    attachment,
    duration,
    formats_doc,
    render,
    retention_doc,
)
from ocrserve.api.routes.upload import read_upload
from ocrserve.api.worker import save_password
from ocrserve.document import Document
from ocrserve.export.formats import get_format
from ocrserve.settings import Settings


class JobView(Job):
    progress: dict[str, int]


def _view(job: Job) -> dict:
    return JobView(
        **job.model_dump(), progress={"pages_done": job.pages_done, "pages_total": job.pages_total}
    ).model_dump()


def _gone_hint(settings: Settings) -> str:
    return (
        ""
        if settings.job_ttl_s <= 0
        else f" (never made, deleted, or expired: finished jobs are kept {duration(settings.job_ttl_s)})"
    )


async def _owned(ctx: Context, job_id: str, who: str) -> Job:
    job = await asyncio.to_thread(ctx.store.get, job_id, None if ctx.auth.open else who)
    if job is None:
        raise NotFound(f"no job {shorten(job_id)}{_gone_hint(ctx.settings)}")
    return job


def _room(ctx: Context, who: str, size: int = 0) -> None:
    """In a thread (SQLite): 429 when the key's unfinished jobs, their bytes with this upload's `size`, or
    the whole queue are at their limit; 413 for an upload that alone is over the key's bytes."""
    s, store = ctx.settings, ctx.store
    if store.count(key=who) >= s.per_key_jobs:
        raise Busy(f"this key has {s.per_key_jobs} unfinished jobs; retry later", s.retry_after_s)
    quota = s.per_key_job_bytes
    if quota > 0:
        if size > quota:
            raise TooLarge(f"upload of {size} bytes: over this key's {quota} bytes of unfinished jobs")
        held = store.queued_bytes(who)
        if held + max(size, 1) > quota:
            raise Busy(
                f"this key has {held} bytes in unfinished jobs (its limit is {quota} bytes); retry when some "
                "have finished",
                s.retry_after_s,
            )
    if store.count() >= s.max_queued_jobs:
        raise Busy("the job queue is full; retry later", s.retry_after_s)


def build(settings: Settings) -> APIRouter:
    """The jobs routes (their docs say how long this service keeps finished jobs)."""
    router = APIRouter(tags=["jobs"])
    retention = retention_doc(settings.job_ttl_s)
    not_found: dict[int | str, dict[str, Any]] = {  # FastAPI's type for `responses`
        404: {
            "description": "No such job for this key: never made, deleted"
            + (", or expired (past its retention time)" if settings.job_ttl_s > 0 else "")
        }
    }

    @router.post("/v1/jobs", status_code=202, openapi_extra=INPUT_DOC)
    async def submit(
        request: Request,
        who: str = Depends(caller),
        pages: str | None = Query(None, description="page ranges, e.g. 1-3,7"),
    ):
        ctx = context(request)
        await asyncio.to_thread(_room, ctx, who)
        job_id = ctx.store.new_id()
        jdir = ctx.store.job_dir(job_id)
        try:
            up = await read_upload(
                request, jdir / "input", ctx.settings.max_upload_bytes, ctx.settings.api_body_timeout_s
            )
            size = (await asyncio.to_thread(up.path.stat)).st_size
            await asyncio.to_thread(_room, ctx, who, size)
            checked = await ctx.service.inspect(up.path, up.filename, pages, up.password)
            if checked.password:
                await asyncio.to_thread(save_password, up.path.parent, checked.password)
            job = await asyncio.to_thread(
                ctx.store.add, job_id, who, up.filename, up.path, checked.pages, checked.selected, size
            )
        except BaseException:
            shutil.rmtree(jdir, ignore_errors=True)
            raise
        ctx.worker.notify()
        return JSONResponse(
            {"id": job.id, "status": job.status, "pages_total": job.pages_total},
            status_code=202,
            headers={"Location": f"/v1/jobs/{job.id}"},
        )

    @router.get(
        "/v1/jobs/{job_id}",
        response_model=JobView,
        responses=not_found,
        description="The job's status (queued, running, done, failed) and progress.\n\n" + retention,
    )
    async def job_status(request: Request, job_id: str, who: str = Depends(caller)):
        return _view(await _owned(context(request), job_id, who))

    @router.get(
        "/v1/jobs/{job_id}/result",
        response_class=Response,
        description="The result of a done job (`409` while it is queued or running, `422` if it failed)."
        "\n\n" + retention,
        responses={
            200: {
                "description": f"The document in the format asked for: {formats_doc()} (not one "
                "built from the source document: a job keeps none)",
                "headers": {STATUS_HEADER: STATUS_HEADER_DOC},
            },
            **not_found,
        },
    )
    async def job_result(request: Request, job_id: str, who: str = Depends(caller), format: FormatQuery = "json"):
        ctx = context(request)
        job = await _owned(ctx, job_id, who)
        if job.status == "failed":
            raise BadDocument(f"job {job_id} failed: {job.error}")
        if job.status != "done":
            raise Conflict(f"job {job_id} is {job.status} ({job.pages_done}/{job.pages_total} pages)")
        fmt = get_format(format)
        if fmt.needs_source:
            raise BadInput(
                f"format={format}: a job keeps no source document once done; "
                f"POST /v1/convert?format={format} returns the {fmt.title or format}"
            )

        def load() -> tuple[str, Document]:  # reading and parsing a large result: off the event loop
            text = ctx.store.job_path(job_id, "result.json").read_text(encoding="utf-8")
            return text, Document.model_validate_json(text)

        try:
            text, doc = await asyncio.to_thread(load)
        except FileNotFoundError:  # removed under us (expired or deleted right now)
            raise NotFound(f"no job {shorten(job_id)}{_gone_hint(ctx.settings)}") from None
        linked = await asyncio.to_thread(job_links, doc, job_id)  # its figures: /v1/jobs/{id}/images/{name}
        resp = (
            Response(text, media_type="application/json")
            if format == "json" and not linked
            else await render(doc, format, ctx.settings.keep_headers_footers)
        )
        resp.headers[STATUS_HEADER] = doc.status
        return resp

    @router.get(
        "/v1/jobs/{job_id}/images/{name}",
        response_class=FileResponse,
        responses=not_found,
        description="A figure crop of a done job (its result links each one here).",
    )
    async def job_image(request: Request, job_id: str, name: str, who: str = Depends(caller)):
        ctx = context(request)
        await _owned(ctx, job_id, who)
        path = await asyncio.to_thread(image_path, ctx.store.job_path(job_id, "images"), name)
        if path is None:
            raise NotFound(f"job {shorten(job_id)} has no image {shorten(name)}")
        return FileResponse(path, media_type="image/png", headers={"Cache-Control": "private, max-age=3600"})

    @router.get(
        "/v1/jobs/{job_id}/archive",
        response_class=FileResponse,
        responses=not_found,
        description="A done job's document folder as a zip: `<name>/<name>.md`, `.html`, `.json` and "
        "`<name>/images/` (the figure crops, linked relative, as `ocrserve convert` writes the folder).",
    )
    async def job_archive(request: Request, job_id: str, who: str = Depends(caller)):
        ctx = context(request)
        job = await _owned(ctx, job_id, who)
        if job.status != "done":
            raise Conflict(f"job {job_id} is {job.status}: only a done job has a document folder")

        def build() -> Path:
            doc = Document.model_validate_json(ctx.store.job_path(job_id, "result.json").read_text(encoding="utf-8"))
            return build_archive(doc, ctx.store.job_path(job_id, "images"), ctx.settings.keep_headers_footers)

        try:
            path = await asyncio.to_thread(build)
        except FileNotFoundError:
            raise NotFound(f"no job {shorten(job_id)}{_gone_hint(ctx.settings)}") from None
        stem = PurePosixPath(job.filename).stem or "document"
        return FileResponse(
            path,
            media_type="application/zip",
            headers={"Content-Disposition": attachment(f"{stem}.zip")},
            background=BackgroundTask(path.unlink, missing_ok=True),
        )

    @router.delete(
        "/v1/jobs/{job_id}",
        responses=not_found,
        description="Delete a job: a running one is stopped; its files go at once.",
    )
    async def job_delete(request: Request, job_id: str, who: str = Depends(caller)):
        ctx = context(request)
        await _owned(ctx, job_id, who)
        ctx.worker.cancel(job_id)
        await asyncio.to_thread(ctx.store.delete, job_id)
        return {"id": job_id, "deleted": True}

    return router
