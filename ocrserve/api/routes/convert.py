"""POST /v1/convert: one document converted while the client waits (in any registered format, or SSE)."""

from __future__ import annotations

import asyncio
import json
import logging
import shutil
import tempfile
import uuid
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import Response

from ocrserve.api.deps import Context, caller, context
from ocrserve.api.errors import BadDocument, BadInput
from ocrserve.api.figures import cache_figures
from ocrserve.api.routes.common import (
    INPUT_DOC,
    STATUS_HEADER,
    STATUS_HEADER_DOC,
    FormatQuery,
    formats_doc,
    render,
    render_body,
)
from ocrserve.api.routes.sse import EventStream, Hold, done_unless_gone
from ocrserve.api.routes.upload import read_upload
from ocrserve.api.service import Checked
from ocrserve.export.formats import get_format
from ocrserve.pipeline.results import DocResult
from ocrserve.render import render_json

log = logging.getLogger(__name__)
FIGURES = ".figures"  # the conversion's document folder, beside the upload (no upload's name starts with a dot)

CONVERT_DOC = (
    "Convert one document (PDF, image, or an Office file through LibreOffice) and answer with the result.\n\n"
    "A document whose pages failed is still a `200` with the Document, whose failed pages carry their "
    f"error: check the `{STATUS_HEADER}` header (`ok`, `fallback` or `failed`) or the pages' `status`. "
    "A file that cannot be opened at all is a `422`; an encrypted PDF needs its `password` field.\n\n"
    "With `stream=true` the answer is a Server-Sent Events stream: `page_started` (page size and image), "
    "`block` (each layout block as soon as its HTML closes in the model's output), `page_reset` (drop the "
    "page's blocks so far: a retried attempt, or a page handed to the fallback), `page_done` (status "
    "ok, fallback or failed, and the page's final blocks), then `done` (the Document and its status) or `error`."
)

router = APIRouter(tags=["convert"])


@router.post(
    "/v1/convert",
    openapi_extra=INPUT_DOC,
    description=CONVERT_DOC,
    responses={
        200: {
            "description": f"The document in the format asked for: {formats_doc()}; with "
            "stream=true an SSE stream of page_started, block, page_reset, "
            "page_done, done, error events",
            "headers": {STATUS_HEADER: STATUS_HEADER_DOC},
        }
    },
)
async def convert(
    request: Request,
    who: str = Depends(caller),
    format: FormatQuery = "json",
    pages: str | None = Query(None, description="page ranges, e.g. 1-3,7"),
    stream: bool = Query(False, description="answer with Server-Sent Events"),
):
    ctx = context(request)
    s = ctx.settings
    work = ctx.uploads / uuid.uuid4().hex
    try:  # the body is read before a slot is taken: a slow or bodiless upload holds no slot
        up = await read_upload(request, work, s.max_upload_bytes, s.api_body_timeout_s)
        ctx.limiter.acquire(who)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
    hold = Hold(ctx.limiter, who, work)
    svc = ctx.service
    task: asyncio.Task | None = None
    handed_off = False
    keep: Path | None = None
    source: Path | None = None
    try:
        fmt = get_format(format)
        if stream and fmt.whole_document:
            raise BadInput(f"format={format} is a whole-document format: not with stream=true")
        checked = await svc.inspect(up.path, up.filename, pages, up.password)
        if stream:
            handed_off = True
            return EventStream(
                partial(_stream_events, ctx, checked, format, who, work / FIGURES),
                hold,
                s.api_stream_buffer_bytes,
                partial(_dropped, ctx, up.filename),
            )
        if fmt.needs_source:  # the upload goes with the slot when the work stops; the file is built after it
            keep = Path(tempfile.mkdtemp(prefix="ocrserve-src-"))
            source = keep / up.path.name
            await asyncio.to_thread(shutil.copyfile, up.path, source)
        task = asyncio.create_task(_convert(ctx, checked, who, work / FIGURES))
        task.add_done_callback(hold.release_cb)  # the slot is the work's: back once the work has stopped
        if not await done_unless_gone(task, request):
            log.info("client went away: conversion of %s stopped", up.filename)
            return Response(status_code=499)  # nobody reads it; uvicorn drops it
        result, _ = task.result()
        if result.document is None:
            raise BadDocument(f"{up.filename}: {result.error}")
        resp = await render(result.document, format, s.keep_headers_footers, source=source, password=up.password)
        resp.headers[STATUS_HEADER] = result.document.status
        return resp
    finally:
        if keep is not None:
            shutil.rmtree(keep, ignore_errors=True)
        if task is not None and not task.done():
            task.cancel()  # no await here: this may run under a cancellation (released by the callback)
        elif not handed_off:
            hold.release()


def _dropped(ctx: Context, filename: str, waiting: int) -> None:
    log.warning("dropped a client that does not read its stream of %s (%d bytes of events waiting)", filename, waiting)
    ctx.metrics.rejected.labels(reason="slow_reader").inc()


async def _convert(ctx: Context, checked: Checked, who: str, figures: Path) -> tuple[DocResult, bool]:
    """The conversion, its figure crops put in the image cache before it ends (its folder goes then)."""
    result, interrupted = await ctx.service.convert(checked, owner=who, figures_dir=figures)
    if result.document is not None:
        await asyncio.to_thread(cache_figures, result.document, result.output, ctx.service.images, who)
    return result, interrupted


async def _stream_events(
    ctx: Context, checked: Checked, fmt: str, who: str, figures: Path, sink: Callable[[str, Any], None]
) -> None:
    """One streamed conversion: its events into sink, then `done` (or `error`). The `done` event's
    Document links its figures (/v1/figures/...); a `page_done` event's blocks name them relative."""
    try:
        result, interrupted = await ctx.service.convert(checked, sink=sink, stream=True, owner=who, figures_dir=figures)
        if result.document is not None:
            await asyncio.to_thread(cache_figures, result.document, result.output, ctx.service.images, who)
            sink("done", await asyncio.to_thread(_done_payload, result, fmt, ctx.settings.keep_headers_footers))
        elif not interrupted:
            sink("error", {"error": f"{checked.filename}: {result.error}"})
    except Exception as e:
        log.exception("streaming conversion of %s", checked.filename)
        ctx.metrics.failures.labels(kind="internal").inc()
        sink("error", {"error": f"internal error: {e!r}"})


def _done_payload(result, fmt: str, keep_hf: bool) -> dict[str, Any]:
    doc = result.document
    payload: dict[str, Any] = {"status": result.status, "document": json.loads(render_json(doc))}
    key = get_format(fmt).event_key  # md: markdown, html: html, txt: text
    if key:
        body = render_body(doc, fmt, keep_hf)[0]
        payload[key] = body.decode("utf-8", errors="replace") if isinstance(body, bytes) else body
    return payload
