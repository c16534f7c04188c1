"""What several routes share: the output formats, the status header, the request-body schema."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Annotated
from urllib.parse import quote

from fastapi import Query
from fastapi.responses import Response
from pydantic import AfterValidator

from ocrserve.api.errors import BadDocument
from ocrserve.document import Document
from ocrserve.export.formats import RenderContext, get_format, output_formats


def known_format(name: str) -> str:
    """A registered output format's name (export/formats.py, asked at request time); an unknown name is
    a validation error (422) naming the known ones."""
    get_format(name)
    return name


# a route's `format: FormatQuery = "json"` (the validator sits beside Query in Annotated: FastAPI runs it there)
FormatQuery = Annotated[
    str,
    AfterValidator(known_format),
    Query(description="the output format, a registered one (the 200 answer lists them)"),
]


def formats_doc() -> str:
    """The registered formats for the API's docs: `json` (the Document, application/json), ..."""
    return ", ".join(f"`{f.name}` ({f.title}, {f.media_type.split(';')[0]})" for f in output_formats())


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
            "multipart/form-data": {
                "schema": {
                    "type": "object",
                    "required": ["file"],
                    "properties": {
                        "file": {
                            "type": "string",
                            "format": "binary",
                            "description": "PDF, image or Office file (DOCX, XLSX, PPTX, ...)",
                        },
                        "password": _PASSWORD,
                    },
                }
            },
            "application/json": {
                "schema": {
                    "type": "object",
                    "required": ["content_base64"],
                    "properties": {
                        "filename": {"type": "string"},
                        "content_base64": {"type": "string"},
                        "password": _PASSWORD,
                    },
                }
            },
        },
    }
}


def render_body(
    doc: Document, fmt: str, keep_hf: bool, source: Path | None = None, password: str | None = None
) -> tuple[bytes | str, str]:
    """(body, media type) of a Document in a registered format (one that needs the source document, pdf,
    is built from `source`: a ValueError building it is the document's, a 422)."""
    f = get_format(fmt)
    try:
        ctx = RenderContext(keep_headers_footers=keep_hf, source=source, password=password)
        return f.render(doc, ctx), f.media_type
    except ValueError as e:
        if not f.needs_source:
            raise
        why = str(e).replace(str(source), doc.source.path) if source is not None else str(e)
        raise BadDocument(f"{f.title or f.name}: {why}") from None  # the upload's name, never a server path


async def render(
    doc: Document, fmt: str, keep_hf: bool, source: Path | None = None, password: str | None = None
) -> Response:
    """The Document as a response, rendered off the event loop (a large document takes a while)."""
    body, media = await asyncio.to_thread(render_body, doc, fmt, keep_hf, source, password)
    return Response(body, media_type=media)


def attachment(name: str) -> str:
    """A Content-Disposition header naming a download: an ASCII `filename`, and for any other name the name
    itself as `filename*` too (RFC 6266; a header is Latin-1, so a name like 报告.md needs it)."""
    plain = "".join(c if " " <= c < "\x7f" and c not in '"\\' else "_" for c in name)
    extended = f"; filename*=UTF-8''{quote(name, safe='')}" if plain != name else ""
    return f'attachment; filename="{plain}"{extended}'


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
    return (
        f"Retention: a finished job (done or failed) is kept {duration(ttl_s)} after it finished "
        "(OCRSERVE_JOB_TTL_S), then removed with its result; its uploaded input is removed as soon as "
        "it finishes. An expired job answers `404`, as a job that never existed or was deleted. "
        "Queued and running jobs never expire."
    )
