"""The service core: one shared engine and render pool; uploads checked, then converted by the pipeline.

`Service.inspect()` opens an upload once (bad file -> BadDocument with the pipeline's reason, too many
pages -> TooManyPages); `Service.convert()` runs the pipeline on it, reporting through a
`ConversionTap` (see `tap.py`). Nothing heavy runs on the event loop: the page selection is parsed in a
thread, documents are opened in the render pool. Answers name the uploaded file, never a server path.
"""

from __future__ import annotations

import asyncio
import logging
import re
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ocrserve.api.errors import BadDocument, BadInput, TooManyPages, shorten
from ocrserve.api.images import PageImages
from ocrserve.api.metrics import Metrics
from ocrserve.api.tap import ConversionTap, Sink
from ocrserve.engines import Engine, create_fallback
from ocrserve.ingest.naming import safe_filename as safe_filename
from ocrserve.ingest.pool import WorkerCrash, run_pool
from ocrserve.ingest.raster import DocumentError, SourceInfo, open_source
from ocrserve.ingest.sources import PageSelection, parse_page_ranges
from ocrserve.pipeline.local import Converter, DocResult
from ocrserve.pipeline.results import DocStatus
from ocrserve.profiles import Profile, load_profile
from ocrserve.settings import Settings

log = logging.getLogger(__name__)

PASSWORD_HINT = "send it in the 'password' field"


def parse_selection(pages: str | None) -> PageSelection | None:
    """`pages=` parsed (None: every page); ValueError naming `pages=` when it is not a page selection.
    Runs in a thread: the text may be long."""
    try:
        return parse_page_ranges(pages)
    except ValueError as e:
        raise ValueError(str(e).replace("--pages", "pages=")) from None


def clip_selection(sel: PageSelection | None, page_count: int) -> list[int] | None:
    """The 0-based pages of a page_count-page document a parsed selection names (None: all)."""
    return None if sel is None else sel.indices(page_count)


def page_spec(indices: list[int]) -> str:
    """0-based indices -> the short 1-based selection that names them ('1-3,7')."""
    out: list[str] = []
    run: list[int] = []
    for i in sorted(set(indices)) + [-2]:
        if run and i == run[-1] + 1:
            run.append(i)
            continue
        if run:
            out.append(str(run[0] + 1) if len(run) == 1 else f"{run[0] + 1}-{run[-1] + 1}")
        run = [i]
    return ",".join(out)


def _scrub(text: str | None, path: Path, filename: str) -> str | None:
    """An error text with the server's path of an upload replaced by the uploaded file's name."""
    if not text:
        return text
    for p in (str(path), str(path.resolve())):
        text = text.replace(p, filename)
    return text.replace(str(path.parent) + "/", "")


@dataclass
class Checked:
    """An upload that opened: its path, what it is, the pages to convert."""

    path: Path
    filename: str
    info: SourceInfo | None
    pages: str | None  # the selection as a short spec ('1-3,7'), None: every page
    selected: int
    password: str | None = None


class Service:
    def __init__(self, settings: Settings, engine: Engine, profile: Profile | None = None) -> None:
        self.settings = settings
        self.engine = engine
        self._profile = profile
        self.pool = run_pool(settings)
        self.images = PageImages(settings.api_page_cache_bytes)
        self.metrics: Metrics  # set by the app
        self._lite: Engine | None = None  # the fallback engine, made on first use

    @property
    def profile(self) -> Profile:
        """The profile pages are read with: the one chosen, else the engine's (which follows its server's
        model once a conversion's preflight has asked it)."""
        return self._profile or getattr(self.engine, "profile", None) or load_profile(self.settings.model)

    async def aclose(self) -> None:
        self.pool.shutdown()
        if self._lite is not None:
            await self._lite.aclose()

    async def fallback_engine(self) -> Engine:
        """The lite engine that rescues pages the model engine gave up on (one for the service)."""
        if self._lite is None:  # no await in between: no other task can interleave
            self._lite = create_fallback(self.profile, self.settings)
        return self._lite

    # ------------------------------------------------------------------ checking an upload
    async def inspect(self, path: Path, filename: str, pages: str | None, password: str | None = None) -> Checked:
        if pages and len(pages) > 20_000:
            raise BadInput(f"pages=: {len(pages)} characters; a page selection is at most 20000")
        if pages and any(len(n) > 7 or int(n) > 1_000_000 for n in re.findall(r"\d+", pages)):
            raise BadInput(f"pages={pages[:80]!r}: page numbers above 1000000 are not accepted")
        sel: PageSelection | None = None
        if pages:  # checked before the file is opened (a bad selection is the request's fault)
            try:
                sel = await asyncio.to_thread(parse_selection, pages)
            except ValueError as e:
                raise BadInput(shorten(str(e), 300)) from None
        try:
            info: SourceInfo = await self.pool.run(
                open_source, str(path), password or None, self.settings.max_image_pixels
            )
        except (DocumentError, WorkerCrash) as e:
            msg = str(e)
            msg = msg.replace("(--password)", f"({PASSWORD_HINT})").replace("--password", "the 'password' field")
            raise BadDocument(f"{filename}: {_scrub(msg, path, filename)}") from None
        indices = None if sel is None else await asyncio.to_thread(clip_selection, sel, info.page_count)
        selected = info.page_count if indices is None else len(indices)
        if indices is not None and selected == 0:
            raise BadDocument(f"{filename}: pages={(pages or '')[:80]} selects none of its {info.page_count} pages")
        if selected > self.settings.max_pages:
            raise TooManyPages(f"{filename}: {selected} pages to convert; the limit is {self.settings.max_pages}")
        return Checked(
            path=path,
            filename=filename,
            info=info,
            selected=selected,
            password=password or None,
            pages=None if indices is None else page_spec(indices),
        )

    # ------------------------------------------------------------------ converting
    async def convert(
        self,
        checked: Checked,
        *,
        sink: Sink | None = None,
        stream: bool = False,
        owner: str = "",
        on_page: Callable[[int, str, Any], None] | None = None,
        known_pages: dict[int, Any] | None = None,
        figures_dir: Path | None = None,
    ) -> tuple[DocResult, bool]:
        """Run the pipeline on one checked upload. Returns (result, interrupted). on_page(index, status,
        page) follows each page; known_pages (index -> Page, from an interrupted run of the same upload)
        are used as they are, not converted again. owner: who may fetch the page images (a key's id).
        figures_dir: an empty folder of the conversion's own; the pipeline writes the document folder
        there with its figure crops (`result.output/images/`, the blocks' `figure` relative to it)."""
        tap = ConversionTap(self.metrics, self.images, sink, stream, owner)

        async def fallback() -> Engine:
            return tap.engine(await self.fallback_engine(), rescue=True)

        def on_event(kind: str, data: dict[str, Any]) -> None:
            if kind == "page_done":
                tap.page_done(
                    data["index"], data["status"], data.get("error"), data.get("page"), bool(data.get("resumed"))
                )
                if on_page:
                    on_page(data["index"], data["status"], data.get("page"))

        conv = Converter(
            engine=tap.engine(self.engine),
            model=self.profile,
            settings=self.settings,
            pages=checked.pages,
            password=checked.password,
            pool=self.pool,
            figures=figures_dir is not None,
            output=str(figures_dir) if figures_dir is not None else None,
            formats=("json",),
            force=True,
            on_event=on_event,
            fallback_engine=fallback,
            known_pages=(lambda name, sha: known_pages) if known_pages else None,
        )
        if figures_dir is not None:
            await asyncio.to_thread(shutil.rmtree, figures_dir, True)  # a run before this one's: not complete
        try:
            summary = await conv.run([checked.path])
        finally:
            tap.close()  # before any await: runs under a cancellation too
            await conv.aclose()
        if not summary.results:
            result = DocResult(
                name=checked.filename,
                path=checked.filename,
                status=DocStatus.FAILED,
                error="interrupted" if summary.interrupted else "no result",
            )
        else:
            result = summary.results[0]
        result.path = checked.filename
        result.error = _scrub(result.error, checked.path, checked.filename)
        if result.document is not None:
            result.document.source.path = checked.filename  # never the data directory's path
        if not summary.interrupted:
            self.metrics.documents.labels(status=result.status).inc()
            if result.document is None:
                self.metrics.failures.labels(kind="document").inc()
        return result, summary.interrupted

    async def ready(self) -> bool:
        try:
            answer = self.engine.check()
            ok = await asyncio.wait_for(answer, timeout=15) if asyncio.iscoroutine(answer) else answer
            return bool(ok)
        except Exception as e:  # noqa: BLE001 - readiness answers, it does not raise
            log.warning("engine check failed: %r", e)
            return False
