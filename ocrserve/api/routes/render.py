"""POST /v1/render: a Document, as /v1/convert or a job answered it, in another format without converting
it again (the viewer's download buttons use it); GET /v1/formats: the formats the API renders.

The Document comes as the JSON body, or as the multipart part `document` beside `file`, the source
document, for a format built from it (pdf: the searchable PDF; the file must be the one the Document
says it read: its sha256 is checked) and `password` for an encrypted PDF. The answer is an attachment
named after the source (`report.md`, `report.chunks.jsonl`). Block HTML is sanitized again when
rendered, so a Document from anywhere renders safely.
"""

from __future__ import annotations

import asyncio
import hashlib
import shutil
import uuid
from pathlib import Path, PurePosixPath

from fastapi import APIRouter, Depends, Request
from fastapi.responses import Response
from pydantic import ValidationError
from starlette.datastructures import UploadFile

from ocrserve.api.deps import caller, context
from ocrserve.api.errors import BadInput, ServiceError, Unsupported
from ocrserve.api.routes.common import FormatQuery, attachment, formats_doc, render
from ocrserve.api.service import safe_filename
from ocrserve.document import Document
from ocrserve.export.formats import get_format, output_formats

router = APIRouter(tags=["convert"])

RENDER_DOC = (
    "Render a Document (the JSON /v1/convert or a job's result answered) in another format, without converting "
    "it again. Send the Document as the JSON body, or as the multipart part `document` with the source "
    "document as `file` (and `password` for an encrypted PDF) for a format built from it (`pdf`). "
    "The answer is an attachment named after the source document."
)
_BODY = {
    "requestBody": {
        "required": True,
        "content": {
            "application/json": {"schema": {"type": "object", "description": "the Document"}},
            "multipart/form-data": {
                "schema": {
                    "type": "object",
                    "required": ["document"],
                    "properties": {
                        "document": {"type": "string", "format": "binary", "description": "the Document JSON"},
                        "file": {"type": "string", "format": "binary", "description": "the source document (for pdf)"},
                        "password": {"type": "string", "description": "the password of an encrypted PDF"},
                    },
                }
            },
        },
    }
}


@router.get("/v1/formats", description="The formats /v1/convert, a job's result and /v1/render answer in.")
async def formats():
    return [
        {
            "name": f.name,
            "title": f.title,
            "suffix": f.suffix,
            "media_type": f.media_type,
            "needs_source": f.needs_source,
            "whole_document": f.whole_document,
        }
        for f in output_formats()
    ]


@router.post(
    "/v1/render",
    openapi_extra=_BODY,
    description=RENDER_DOC,
    response_class=Response,
    responses={200: {"description": f"The document in the format asked for: {formats_doc()}"}},
)
async def render_document(request: Request, who: str = Depends(caller), format: FormatQuery = "md"):
    ctx = context(request)
    work = ctx.uploads / uuid.uuid4().hex
    ctx.limiter.acquire(who)
    try:
        async with asyncio.timeout(ctx.settings.api_body_timeout_s or None):
            raw, source, password = await _read(request, work)
        try:
            doc = await asyncio.to_thread(Document.model_validate_json, raw)
        except ValidationError as e:
            raise BadInput(
                f"document: not a Document JSON ({e.errors()[0]['msg']} at "
                f"{'.'.join(map(str, e.errors()[0]['loc'])) or 'the top'})"
            ) from None
        fmt = get_format(format)
        if fmt.needs_source:
            if source is None:
                raise BadInput(
                    f"format={format} is built from the source document: send the Document as the "
                    "multipart part 'document' and the source as 'file'"
                )
            sha = await asyncio.to_thread(_sha256, source)
            if doc.source.sha256 and sha != doc.source.sha256:
                raise BadInput(f"file: not the document's source (its sha256 is not {doc.source.sha256[:12]}...)")
        resp = await render(doc, format, ctx.settings.keep_headers_footers, source=source, password=password)
        stem = PurePosixPath(doc.source.path.replace("\\", "/")).stem or "document"
        name = safe_filename(stem + fmt.suffix)
        resp.headers["Content-Disposition"] = attachment(name)
        return resp
    except TimeoutError:
        raise BadInput(f"the request body did not arrive within {ctx.settings.api_body_timeout_s:g} s") from None
    finally:
        ctx.limiter.release(who)
        shutil.rmtree(work, ignore_errors=True)


async def _read(request: Request, work: Path) -> tuple[bytes, Path | None, str | None]:
    """(the Document's JSON, the source document written to `work` or None, the password)."""
    ctype = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if ctype == "application/json":
        return await request.body(), None, None
    if ctype != "multipart/form-data":
        raise Unsupported("send the Document as a JSON body, or multipart/form-data with a 'document' part")
    try:
        form = await request.form(max_files=2, max_fields=8)
    except ServiceError:  # over the size limit while it arrived
        raise
    except Exception as e:  # noqa: BLE001 - a malformed multipart body is the request's fault
        raise BadInput(f"cannot read the multipart body: {getattr(e, 'detail', None) or e}") from None
    try:
        part = form.get("document")
        if isinstance(part, UploadFile):
            raw = await part.read()
        elif isinstance(part, str):
            raw = part.encode("utf-8")
        else:
            raise BadInput("send the Document as the multipart part 'document'")
        source = None
        up = form.get("file")
        if isinstance(up, UploadFile):
            work.mkdir(parents=True, exist_ok=True)
            source = work / safe_filename(up.filename)
            await asyncio.to_thread(_copy, up.file, source)
        pw = form.get("password")
        return raw, source, pw if isinstance(pw, str) and pw else None
    finally:
        await form.close()


def _copy(src, path: Path) -> None:
    src.seek(0)
    with open(path, "wb") as f:
        shutil.copyfileobj(src, f, 1024 * 1024)


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()
