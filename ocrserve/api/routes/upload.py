"""Reading an upload: multipart `file` (+ `password`) or JSON {filename, content_base64, password}.

The whole body is read under a deadline (`api_body_timeout_s`) before the request takes any slot, so a
client that sends headers and then nothing (or a trickle) holds nothing but its connection, and is
answered 408 when the deadline passes.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import shutil
from dataclasses import dataclass
from pathlib import Path

from fastapi import Request
from pydantic import BaseModel, ValidationError
from starlette.datastructures import UploadFile
from starlette.exceptions import HTTPException as StarletteHTTPException

from ocrserve.api.errors import BadDocument, BadInput, ServiceError, SlowUpload, TooLarge, Unsupported
from ocrserve.api.service import safe_filename


class JSONUpload(BaseModel):
    filename: str = "upload"
    content_base64: str
    password: str | None = None


@dataclass
class Upload:
    path: Path
    filename: str
    password: str | None


async def read_upload(request: Request, dest_dir: Path, limit: int, timeout_s: float) -> Upload:
    """The uploaded document written to dest_dir. BadInput / TooLarge / Unsupported / BadDocument (empty)
    on bad requests; SlowUpload when the body has not arrived within timeout_s (0: no deadline)."""
    try:
        async with asyncio.timeout(timeout_s if timeout_s > 0 else None):
            up = await _read(request, dest_dir, limit)
    except TimeoutError:
        raise SlowUpload(f"the request body did not arrive within {timeout_s:g} s") from None
    return up


async def _read(request: Request, dest_dir: Path, limit: int) -> Upload:
    ctype = request.headers.get("content-type", "").split(";")[0].strip().lower()
    dest_dir.mkdir(parents=True, exist_ok=True)
    password: str | None = None
    if ctype == "multipart/form-data":
        try:
            form = await request.form(max_files=1, max_fields=16)
        except ServiceError:  # over the size limit while it arrived: 413, not a malformed body
            raise
        except StarletteHTTPException as e:
            raise BadInput(f"cannot read the multipart body: {e.detail}") from None
        except Exception as e:  # noqa: BLE001 - any parse failure of a malformed multipart body is bad input
            raise BadInput(f"cannot read the multipart body: {str(e) or type(e).__name__}") from None
        try:  # the form's spooled files are closed whatever happens (a large part is a temp file on disk)
            up = form.get("file")
            if not isinstance(up, UploadFile):
                raise BadInput("send the document as a multipart file field named 'file'")
            pw = form.get("password")
            password = pw if isinstance(pw, str) and pw else None
            name = safe_filename(up.filename)
            path = dest_dir / name
            size = await asyncio.to_thread(_copy, up.file, path)
        finally:
            await form.close()
    elif ctype == "application/json":
        body = await request.body()
        name, password, data = await asyncio.to_thread(_decode_json, body)  # up to ~133 MB: off the loop
        path = dest_dir / name
        size = len(data)
        if size <= limit:
            await asyncio.to_thread(path.write_bytes, data)
    else:
        raise Unsupported("send multipart/form-data with a 'file' field, or JSON {filename, content_base64}")
    if size > limit:
        raise TooLarge(f"upload too large: {size} bytes; the limit is {limit} bytes")
    if size == 0:
        raise BadDocument(f"{name}: the file is empty")
    return Upload(path, name, password)


def _decode_json(body: bytes) -> tuple[str, str | None, bytes]:
    """(safe filename, password, the document's bytes) of a JSON upload."""
    try:
        up = JSONUpload.model_validate_json(body)
    except ValidationError as e:
        raise BadInput(
            f'JSON body must be {{"filename", "content_base64", "password"?}}: {e.errors()[0]["msg"]}'
        ) from None
    try:
        data = base64.b64decode(up.content_base64, validate=True)
    except (binascii.Error, ValueError) as e:
        raise BadInput(f"content_base64 is not valid base64: {e}") from None
    return safe_filename(up.filename), up.password or None, data


def _copy(src, path: Path) -> int:
    src.seek(0)
    with open(path, "wb") as f:
        shutil.copyfileobj(src, f, 1024 * 1024)
        return f.tell()
