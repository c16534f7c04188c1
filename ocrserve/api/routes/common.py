"""What several routes share: the output formats, the status header, the request-body schema."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Literal

from fastapi.responses import Response

from ocrserve.api.errors import BadDocument
from ocrserve.document import Document
from ocrserve.export.formats import render_format
from ocrserve.export.searchable_pdf import SearchablePdfError
from ocrserve.render import render_html, render_json, render_markdown

Format = Literal["json", "md", "html", "pdf", "chunks"]
STATUS_HEADER = "X-OCR-Status"
STATUS_HEADER_DOC = {
    "description": "The document's status (not sent with stream=true; the `done` event has it): `ok` (every "
                   "page by the model), `fallback` (some pages rescued by the lite engine, none failed) or "
                   "`failed` (at least one page failed; the Document's pages say which and why).",
    "schema": {"type": "string", "enum": ["ok", "fallback", "failed"]},
}
_PASSWORD = {"type": "string", "description": "the password of an encrypted PDF"}
INPUT_DOC = {
    "requestBody": {
        "required": True,
        "content": {
            "multipart/form-data": {"schema": {
                "type": "object", "required": ["file"],
                "properties": {"file": {"type": "string", "format": "binary", "description": "PDF or image"},
                               "password": _PASSWORD},
            }},
            "application/json": {"schema": {
                "type": "object", "required": ["content_base64"],
                "properties": {"filename": {"type": "string"}, "content_base64": {"type": "string"},
                               "password": _PASSWORD},
            }},
        },
    }
}


def render_text(doc: Document, fmt: str, keep_hf: bool, source: Path | None = None,
                password: str | None = None) -> tuple[bytes | str, str]:
    """(body, media type) of a Document in a format (pdf needs the source document)."""
    if fmt == "md":
        return render_markdown(doc, keep_headers_footers=keep_hf), "text/markdown; charset=utf-8"
    if fmt == "html":
        return render_html(doc), "text/html; charset=utf-8"
    if fmt in ("pdf", "chunks"):
        try:
            return render_format(doc, fmt, source, keep_headers_footers=keep_hf, password=password)
        except SearchablePdfError as e:
            why = str(e).replace(str(source), doc.source.path) if source is not None else str(e)
            raise BadDocument(f"searchable PDF: {why}") from None  # the upload's name, never a server path
    return render_json(doc), "application/json"


async def render(doc: Document, fmt: str, keep_hf: bool, source: Path | None = None,
                 password: str | None = None) -> Response:
    """The Document as a response, rendered off the event loop (a large document takes a while)."""
    body, media = await asyncio.to_thread(render_text, doc, fmt, keep_hf, source, password)
    return Response(body, media_type=media)


def duration(seconds: float) -> str:
    """7 days, 36 hours, 90 minutes, 1 second: the largest unit that divides the value evenly."""
    s = float(seconds)
    for unit, size in (("day", 86400), ("hour", 3600), ("minute", 60)):
        if s >= size and s % size == 0:
            n = int(s // size)
            return f"{n} {unit}{'s' if n != 1 else ''}"
    return f"{s:g} second{'s' if s != 1 else ''}"


def retention_doc(ttl_s: float) -> str:
    if ttl_s <= 0:
        return "Finished jobs are kept until they are deleted (OCRSERVE_JOB_TTL_S=0)."
    return (f"Retention: a finished job (done or failed) is kept {duration(ttl_s)} after it finished "
            "(OCRSERVE_JOB_TTL_S), then removed with its result; its uploaded input is removed as soon as "
            "it finishes. An expired job answers `404`, as a job that never existed or was deleted. "
            "Queued and running jobs never expire.")
