"""The per-page steps every scheduler (local asyncio, Ray Data) runs: the fallback rule, and raw engine
output -> finished Page (parse, figure crops; runs in the render workers, off the event loop)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Awaitable, Callable

from ocrserve.document import Document, Page, PageTimings, Source
from ocrserve.engines.base import Engine, EngineResult, PageInput
from ocrserve.ingest.pool import WorkerCrash
from ocrserve.ingest.raster import DocumentError, RenderedPage, SourceInfo
from ocrserve.ingest.sources import PageSelection
from ocrserve.parse import parse_output
from ocrserve.profiles import Profile
from ocrserve.labels import FIGURE_LABELS


def finish_page(
    raw: str,
    profile: Profile,
    *,
    index: int,
    width: float,
    height: float,
    unit: str,
    image_size: tuple[int, int] | None,
    png: bytes | None,
    staging: str | None,
    prefix: str,
    truncated: bool | None = None,
) -> Page:
    t0 = time.perf_counter()
    page = parse_output(raw, profile, (width, height), index=index, unit=unit, truncated=truncated)
    if image_size:
        page.image_width, page.image_height = image_size
    if staging and png and Path(staging).is_dir() and any(b.label in FIGURE_LABELS for b in page.blocks):
        from ocrserve.png import decode_png
        from ocrserve.render.figures import crop_figures

        crop_figures(page, decode_png(png), Path(staging), prefix)  # a gray page stays gray: no RGB copy
    page.timings = PageTimings(parse_s=time.perf_counter() - t0)
    return page

async def with_fallback(
    res: EngineResult, page: PageInput, *, engine_name: str, enabled: bool,
    get_fallback: Callable[[], Awaitable[Engine]],
) -> tuple[EngineResult, str, str | None]:
    """(result, status ok|fallback|failed, the model's error for a rescued or failed page)."""
    if res.ok:
        return res, "ok", None
    if enabled and engine_name != "lite":
        fb = await get_fallback()
        try:
            res2 = await fb.ocr(page)
        except Exception as e:  # noqa: BLE001 - the fallback never loses the page either
            res2 = EngineResult(ok=False, engine="lite", error=f"fallback error: {e!r}")
        if res2.ok:
            res2.attempts += res.attempts
            return res2, "fallback", res.error
        res.error = f"{res.error}; fallback failed: {res2.error}"
    return res, "failed", res.error


# ------------------------------------------------------------------ the steps around the engine


def page_indices(selection: PageSelection | None, page_count: int) -> list[int]:
    """The 0-based pages of a document of `page_count` pages that a run converts."""
    if selection is None:
        return list(range(page_count))
    return selection.indices(page_count)


def open_error(e: BaseException) -> str:
    """Why a document could not be opened, as the run reports it."""
    if isinstance(e, (DocumentError, WorkerCrash)):
        return str(e)
    return f"cannot open: {e!r}"


def render_failed(index: int, e: BaseException) -> Page:
    """The page of a page that could not be rendered."""
    why = f"render: {e}" if isinstance(e, (DocumentError, WorkerCrash)) else f"render: {e!r}"
    return Page(index=index, width=0, height=0, status="failed", error=why)


def page_input(doc_id: str, rp: RenderedPage, source_path: str, source_type: str, password: str | None) -> PageInput:
    return PageInput(
        doc_id=doc_id, index=rp.index, png=rp.png, width=rp.width, height=rp.height, unit=rp.unit,
        source_path=source_path, source_type=source_type, password=password, render_s=rp.render_s,
        image_size=(rp.image_width, rp.image_height),
    )


def engine_error(engine_name: str, e: BaseException) -> EngineResult:
    """An engine that raised for a page (a bug: engines answer ok=False) still leaves the page a result."""
    return EngineResult(ok=False, engine=engine_name, error=f"engine error: {e!r}")


def parse_kwargs(res: EngineResult, rp: RenderedPage) -> dict:
    """finish_page's arguments for a rendered page and its engine result (figure options aside)."""
    return dict(index=rp.index, width=rp.width, height=rp.height, unit=rp.unit,
                image_size=(rp.image_width, rp.image_height),
                truncated=(res.finish_reason == "length") if res.finish_reason else None)


def result_page(res: EngineResult, status: str, model_error: str | None, rp: RenderedPage,
                parsed: Page | BaseException | None, *, engine_s: float, default_engine: str,
                keep_raw: bool) -> Page:
    """The page as the Document keeps it: the parsed page (None when the page failed before parsing,
    an exception when parsing broke) with the engine's account (status, attempts, tokens, timings)."""
    if status == "failed" or parsed is None:
        page = Page(index=rp.index, width=rp.width, height=rp.height, unit=rp.unit, status="failed",
                    image_width=rp.image_width, image_height=rp.image_height)
    elif isinstance(parsed, BaseException):  # the parser never throws; a crashed worker can
        page = Page(index=rp.index, width=rp.width, height=rp.height, unit=rp.unit, status="failed")
        model_error, status = f"postprocess: {parsed}", "failed"
    else:
        page = parsed
    page.status = status  # type: ignore[assignment]
    page.engine = res.engine or default_engine or None
    page.attempts = res.attempts
    page.prompt_tokens, page.completion_tokens = res.prompt_tokens, res.completion_tokens
    page.error = model_error
    # the engine's own time for the page (request to answer, retries included), else the wait around it
    page.timings = PageTimings(render_s=rp.render_s, engine_s=res.elapsed_s or engine_s, parse_s=page.timings.parse_s)
    if keep_raw:
        page.raw = res.raw
    return page


def assemble_document(path: str, info: SourceInfo, pages: list[Page], engine_name: str, model_name: str) -> Document:
    return Document(
        source=Source(path=path, sha256=info.sha256, type=info.type, page_count=info.page_count),
        model=model_name if engine_name != "lite" else "lite",
        pages=pages,
    )
