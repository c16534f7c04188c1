"""The MCP server's work, apart from the protocol (ocrserve/mcp/server.py speaks that).

Where a document may come from: a path on this machine inside the allowed roots (a path outside them,
also through a symlink, is refused), or its bytes (base64) with a file name, up to the upload limit
(OCRSERVE_MAX_UPLOAD_BYTES, as the HTTP API). It is opened first (a PDF's pages counted, an Office file
converted by LibreOffice), so a document over the page limit (OCRSERVE_MAX_PAGES) is refused before any
page is converted. Then the pipeline converts it with the engine and model asked for (engines are made
once and shared), in one render pool for the whole server.

Every conversion is kept by id, for its owner only (with keys, a key's fingerprint; over stdio the one
local client): one converted while the client waits, or a job converted in the background. Jobs are
asyncio tasks of this process, at most OCRSERVE_JOB_WORKERS at once: they live as long as the server
(the HTTP API's jobs, persistent across restarts, are `ocrserve api`'s). The last `keep` finished
conversions are kept in memory; older ones are forgotten.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import logging
import re
import shutil
import tempfile
import time
import uuid
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ocrserve.api.limits import KeyLimiter
from ocrserve.document import Document
from ocrserve.engines import ENGINE_NAMES, Engine, create_engine, create_fallback, engine_for
from ocrserve.errors import OcrserveError
from ocrserve.export.formats import render_format
from ocrserve.ingest.naming import safe_filename as safe_filename  # the HTTP API's, any script kept
from ocrserve.ingest.pool import ResilientPool, run_pool
from ocrserve.ingest.raster import DocumentError, open_source
from ocrserve.ingest.sources import parse_page_ranges
from ocrserve.pipeline.local import Converter
from ocrserve.profiles import PROFILES, load_profile
from ocrserve.settings import Settings

log = logging.getLogger(__name__)

FORMATS = ("md", "json", "html", "chunks", "txt")
LOCAL = "local"
_ID = re.compile(r"[0-9a-f]{32}")


class RequestError(OcrserveError, ValueError):
    """A request this server does not serve; the message says why (the client sees it as the tool's error)."""


@dataclass
class Conversion:
    """One document converted (or being converted), by id."""

    id: str
    owner: str
    filename: str
    status: str = "queued"  # queued | running | done | failed
    pages_total: int = 0
    pages_done: int = 0
    pages_failed: int = 0
    error: str | None = None
    document: Document | None = None
    created: float = field(default_factory=time.time)
    finished: float | None = None
    task: asyncio.Task | None = None

    def public(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "id": self.id,
            "status": self.status,
            "filename": self.filename,
            "pages_total": self.pages_total,
            "pages_done": self.pages_done,
            "pages_failed": self.pages_failed,
            "error": self.error,
        }
        if self.document is not None:
            out["type"] = self.document.source.type
            out["resources"] = {
                "markdown": f"ocrserve://documents/{self.id}/markdown",
                "json": f"ocrserve://documents/{self.id}/json",
            }
        return out


@dataclass
class _Input:
    path: Path
    filename: str
    pages: str | None
    password: str | None
    engine: str
    model: str | None
    upload: Path | None = None  # the folder of an upload, removed when the conversion ends


class DocumentService:
    def __init__(
        self,
        settings: Settings,
        roots: list[Path],
        *,
        engine: str | None = None,
        model: str | None = None,
        keep: int = 200,
    ) -> None:
        self.settings = settings.for_service()
        self.roots = [Path(r).expanduser().resolve() for r in roots]
        self.engine_name = engine_for(engine or settings.engine, settings.server)
        self.model = model or settings.model
        self.keep = max(1, keep)
        self.limiter = KeyLimiter(settings.per_key_concurrency, settings.retry_after_s)
        self.job_slots = asyncio.Semaphore(max(1, settings.job_workers))
        self.conversions: OrderedDict[str, Conversion] = OrderedDict()
        self._engines: dict[tuple[str, str | None], Engine] = {}
        self._fallback: Engine | None = None
        self._pool: ResilientPool | None = None
        self._uploads = Path(tempfile.mkdtemp(prefix="ocrserve-mcp-"))

    async def aclose(self) -> None:
        tasks = [c.task for c in self.conversions.values() if c.task is not None and not c.task.done()]
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for e in [*self._engines.values(), *([self._fallback] if self._fallback else [])]:
            try:
                await e.aclose()
            except Exception:  # closing at exit: nothing to report to
                log.debug("closing an engine", exc_info=True)
        if self._pool is not None:
            self._pool.shutdown()
        shutil.rmtree(self._uploads, ignore_errors=True)

    # ------------------------------------------------------------------ where a document comes from
    def locate(self, path: str) -> Path:
        """A path inside an allowed root (a relative one is taken in the first root); RequestError otherwise."""
        p = Path(path).expanduser()
        if not p.is_absolute():
            p = self.roots[0] / p
        real = p.resolve()
        if not any(real == r or real.is_relative_to(r) for r in self.roots):
            raise RequestError(
                f"{path}: outside the allowed roots ({', '.join(map(str, self.roots))}); "
                "start the server with --allow-root DIR to allow another folder"
            )
        if not real.exists():
            raise RequestError(f"{path}: no such file")
        if not real.is_file():
            raise RequestError(f"{path}: not a file (convert one document at a time)")
        return real

    def stage(self, content_base64: str, filename: str | None) -> tuple[Path, str]:
        """Uploaded bytes written to a folder of their own; RequestError when too large, empty or not base64."""
        limit = self.settings.max_upload_bytes
        if len(content_base64) > limit * 4 // 3 + 8:
            raise RequestError(f"upload too large: the limit is {limit} bytes (OCRSERVE_MAX_UPLOAD_BYTES)")
        try:
            data = base64.b64decode(content_base64, validate=True)
        except (binascii.Error, ValueError) as e:
            raise RequestError(f"content_base64 is not valid base64: {e}") from None
        if len(data) > limit:
            raise RequestError(f"upload too large: {len(data)} bytes; the limit is {limit} bytes")
        name = safe_filename(filename)
        if not data:
            raise RequestError(f"{name}: the file is empty")
        folder = self._uploads / uuid.uuid4().hex
        folder.mkdir()
        (folder / name).write_bytes(data)
        return folder / name, name

    def _pool_(self) -> ResilientPool:
        if self._pool is None:
            self._pool = run_pool(self.settings)
        return self._pool

    async def _input(
        self,
        path: str | None,
        content_base64: str | None,
        filename: str | None,
        pages: str | None,
        password: str | None,
        engine: str | None,
        model: str | None,
    ) -> tuple[_Input, int]:
        """The document to convert and how, checked: (input, pages to convert)."""
        if engine is not None and engine not in ENGINE_NAMES:
            raise RequestError(f"engine {engine!r}: use one of {', '.join(ENGINE_NAMES)}")
        engine = engine_for(engine or self.engine_name, self.settings.server)
        if engine == "openai" and not self.settings.server:
            raise RequestError("engine openai needs a server: start the MCP server with --server URL")
        if model is not None and model not in PROFILES and model != self.model:
            raise RequestError(f"model {model!r}: use one of {', '.join(PROFILES)}")
        try:
            sel = parse_page_ranges(pages)
        except ValueError as e:
            raise RequestError(str(e).replace("--pages", "pages")) from None
        if (path is None) == (content_base64 is None):
            raise RequestError("give either path (a file on the server's machine) or content_base64 with filename")
        upload = None
        if path is not None:
            src, name = self.locate(path), None
        else:
            src, name = self.stage(content_base64 or "", filename)
            upload = src.parent
        name = name or src.name
        try:
            try:
                info = await self._pool_().run(open_source, str(src), password or None, self.settings.max_image_pixels)
            except DocumentError as e:
                raise RequestError(f"{name}: {_scrub(str(e), src, name)}") from None
            selected = info.page_count if sel is None else sel.count(info.page_count)
            if selected == 0:
                raise RequestError(f"{name}: pages={pages} selects none of its {info.page_count} pages")
            if selected > self.settings.max_pages:
                raise RequestError(
                    f"{name}: {selected} pages to convert; the limit is {self.settings.max_pages} "
                    "(OCRSERVE_MAX_PAGES; ask for fewer with pages)"
                )
        except BaseException:
            if upload is not None:
                shutil.rmtree(upload, ignore_errors=True)
            raise
        return _Input(src, name, pages or None, password or None, engine, model or self.model, upload), selected

    # ------------------------------------------------------------------ conversions
    async def convert(self, owner: str, **request: Any) -> Conversion:
        """Convert one document while the caller waits (at most OCRSERVE_PER_KEY_CONCURRENCY at once per owner)."""
        try:
            self.limiter.acquire(owner)
        except OcrserveError as e:
            raise RequestError(str(e)) from None
        try:
            inp, selected = await self._input(**request)
            conv = self._add(owner, inp.filename, selected)
            await self._run(conv, inp)
            return conv
        finally:
            self.limiter.release(owner)

    async def submit(self, owner: str, **request: Any) -> Conversion:
        """Check a document and convert it in the background; its id is returned at once."""
        mine = sum(c.owner == owner and c.status in ("queued", "running") for c in self.conversions.values())
        if mine >= self.settings.per_key_jobs:
            raise RequestError(f"too many unfinished jobs ({mine}); wait for some to finish")
        if sum(c.status in ("queued", "running") for c in self.conversions.values()) >= self.settings.max_queued_jobs:
            raise RequestError("the job queue is full; retry later")
        inp, selected = await self._input(**request)
        conv = self._add(owner, inp.filename, selected)

        async def job() -> None:
            async with self.job_slots:
                await self._run(conv, inp)

        conv.task = asyncio.create_task(job(), name=f"ocrserve-mcp-job-{conv.id}")
        return conv

    def get(self, owner: str, conversion_id: str) -> Conversion:
        conv = self.conversions.get(conversion_id) if _ID.fullmatch(conversion_id or "") else None
        if conv is None or conv.owner != owner:
            raise RequestError(
                f"no document or job {conversion_id[:40]!r} (unknown, or forgotten: the server keeps "
                f"the last {self.keep})"
            )
        return conv

    def render(self, conv: Conversion, fmt: str) -> str:
        """A finished conversion's document in `fmt`; RequestError while it runs or when it failed."""
        if fmt not in FORMATS:
            raise RequestError(f"format {fmt!r}: use one of {', '.join(FORMATS)}")
        if conv.status in ("queued", "running"):
            raise RequestError(
                f"{conv.id} is {conv.status}: {conv.pages_done} of {conv.pages_total} pages done; "
                "ask job_status until it is done"
            )
        if conv.document is None:
            raise RequestError(f"{conv.filename}: the conversion failed: {conv.error}")
        data, _ = render_format(
            conv.document, fmt, images=False, keep_headers_footers=self.settings.keep_headers_footers
        )
        return data.decode("utf-8")

    def _add(self, owner: str, filename: str, pages: int) -> Conversion:
        conv = Conversion(id=uuid.uuid4().hex, owner=owner, filename=filename, pages_total=pages)
        self.conversions[conv.id] = conv
        finished = [k for k, c in self.conversions.items() if c.status in ("done", "failed")]
        for k in finished[: max(0, len(finished) - self.keep)]:
            del self.conversions[k]
        return conv

    async def _engine(self, name: str, model: str | None) -> Engine:
        key = (name, model)
        if key not in self._engines:
            self._engines[key] = create_engine(name, model, self.settings)
        return self._engines[key]

    async def _fallback_engine(self) -> Engine:
        if self._fallback is None:
            self._fallback = create_fallback(load_profile(self.model), self.settings)
        return self._fallback

    async def _run(self, conv: Conversion, inp: _Input) -> None:
        conv.status = "running"

        def on_event(kind: str, data: dict[str, Any]) -> None:
            if kind == "page_done":
                conv.pages_done += 1
                conv.pages_failed += data.get("status") == "failed"

        try:
            conv_ = Converter(
                engine=await self._engine(inp.engine, inp.model),
                model=inp.model,
                settings=self.settings,
                pages=inp.pages,
                password=inp.password,
                pool=self._pool_(),
                figures=False,
                on_event=on_event,
                fallback_engine=self._fallback_engine,
            )
            try:
                summary = await conv_.run([inp.path])
            finally:
                await conv_.aclose()
            result = summary.results[0] if summary.results else None
            if result is None or result.document is None:
                conv.status = "failed"
                conv.error = _scrub(result.error if result else "no result", inp.path, inp.filename)
            else:
                conv.status, conv.document = "done", result.document
                conv.error = _scrub(result.error, inp.path, inp.filename)
                conv.pages_failed = sum(p.status == "failed" for p in result.document.pages)
                if inp.upload is not None:
                    conv.document.source.path = inp.filename  # never the server's folder of uploads
        except asyncio.CancelledError:
            conv.status, conv.error = "failed", "cancelled (the server stopped)"
            raise
        except Exception as e:  # one conversion's failure is its own, never the server's
            log.exception("conversion %s", conv.id)
            conv.status, conv.error = "failed", _scrub(str(e) or repr(e), inp.path, inp.filename)
        finally:
            conv.finished = time.time()
            if inp.upload is not None:
                shutil.rmtree(inp.upload, ignore_errors=True)


def _scrub(text: str | None, path: Path, filename: str) -> str | None:
    """An error text with the server's path of an upload replaced by its file name."""
    if not text:
        return text
    return text.replace(str(path), filename).replace(str(path.parent) + "/", "")
