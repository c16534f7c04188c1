"""The per-page steps every scheduler (local asyncio, Ray Data) runs: the page's status from its engine
result (the fallback itself is a wrapper engine: engines/fallback.py), and raw engine output -> finished
Page (parse, the fallback's fill-in, figure crops; runs in the render workers, off the event loop)."""

from __future__ import annotations

import html
import re
import time
from pathlib import Path

from ocrserve.document import Block, Document, Page, PageStatus, PageTimings, Source, Summary
from ocrserve.engines.base import EngineResult, PageInput
from ocrserve.ingest.pool import WorkerCrash
from ocrserve.ingest.raster import DocumentError, RenderedPage, SourceInfo, readable
from ocrserve.ingest.sources import PageSelection
from ocrserve.labels import FIGURE_LABELS
from ocrserve.parse import canonical_label, parse_output
from ocrserve.profiles import Profile
from ocrserve.sanitize import MathStore, fragment_source


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
    fill_raw: str | None = None,
) -> Page:
    t0 = time.perf_counter()
    page = parse_output(raw, profile, (width, height), index=index, unit=unit, truncated=truncated)
    if fill_raw:
        fill = parse_output(fill_raw, profile, (width, height), index=index, unit=unit)
        fill_in(page, fill.blocks)
    if image_size:
        page.image_width, page.image_height = image_size
    if staging and png and Path(staging).is_dir() and any(b.label in FIGURE_LABELS for b in page.blocks):
        from ocrserve.render.figures import crop_figures_png

        # the page inflated down to the lowest figure only, the crops cut from its rows (a gray page stays gray)
        crop_figures_png(page, png, Path(staging), prefix)
    page.timings = PageTimings(parse_s=time.perf_counter() - t0)
    return page


# a `data-label=` and its value as the HTML tokenizer ends it: a quote, or ASCII whitespace or `>` unquoted;
# tried at every `data-label` (one inside another attribute's value hides none after it)
_LABEL_NAME = re.compile("data-label", re.IGNORECASE)
_LABEL_ATTR = re.compile(
    r"""data-label[\t\n\f\r ]*=[\t\n\f\r ]*(?:"([^"]*)"|'([^']*)'|([^\t\n\f\r >]*))""", re.IGNORECASE
)


def may_have_figures(profile: Profile, *raws: str | None) -> bool:
    """False only when the parser can make no figure block of these answers: no `data-label` in the text
    the parser reads (`fragment_source`: cleaned, math out) whose value, as written or with its character
    references decoded, is a figure label of the profile. The page's PNG then need not go to the worker that
    parses it (a 400 KB trip through the pool's pipe that the crops alone need). Anything that reads like a
    label counts, in text too: a page with figures never goes without its PNG."""
    seen: dict[str, bool] = {}  # the few values a page repeats (Text, Section-Header, ...)
    for raw in raws:
        if not raw:
            continue
        text = fragment_source(raw, MathStore())
        for name in _LABEL_NAME.finditer(text):
            m = _LABEL_ATTR.match(text, name.start())
            if m is None:
                continue
            value = m.group(1) or m.group(2) or m.group(3) or ""
            figure = seen.get(value)
            if figure is None:
                figure = seen[value] = any(
                    canonical_label(v, profile.labels) in FIGURE_LABELS for v in {value, html.unescape(value)}
                )
            if figure:
                return True
    return False


def _overlap(a: list[float], b: list[float]) -> float:
    w = min(a[2], b[2]) - max(a[0], b[0])
    h = min(a[3], b[3]) - max(a[1], b[1])
    return w * h if w > 0 and h > 0 else 0.0


def fill_in(page: Page, fill: list[Block]) -> None:
    """Add to the page the fallback's blocks that lie where the model's blocks are not (a block half or
    more covered by the model's is left out), after the model's, marked origin=fallback."""
    covered = [b.bbox for b in page.blocks if b.bbox_source != "missing"]
    n = len(page.blocks)
    for blk in fill:
        x0, y0, x1, y1 = blk.bbox
        area = max(0.0, x1 - x0) * max(0.0, y1 - y0)
        if area <= 0 or sum(_overlap(blk.bbox, c) for c in covered) >= 0.5 * area:
            continue
        page.blocks.append(blk.model_copy(update={"index": n, "origin": "fallback"}))
        n += 1


def page_status(res: EngineResult) -> tuple[PageStatus, str | None]:
    """(status ok|fallback|failed, the model's error kept for a rescued, looped or failed page) of an
    engine result (a FallbackEngine's: `rescued` marks the fallback's answer for a page the model gave
    up on; a page that still looped keeps its text, and the fallback's answer in `extra["fill_raw"]`)."""
    if res.rescued:
        return PageStatus.FALLBACK, res.error
    if res.ok:
        return PageStatus.OK, res.error if res.finish_reason == "loop" else None
    return PageStatus.FAILED, res.error


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
    source_path, source_type = readable(source_path, source_type)  # an Office file: its PDF
    return PageInput(
        doc_id=doc_id,
        index=rp.index,
        png=rp.png,
        width=rp.width,
        height=rp.height,
        unit=rp.unit,
        source_path=source_path,
        source_type=source_type,
        password=password,
        render_s=rp.render_s,
        image_size=(rp.image_width, rp.image_height),
    )


def parse_kwargs(res: EngineResult, rp: RenderedPage) -> dict:
    """finish_page's arguments for a rendered page and its engine result (figure options aside)."""
    return {
        "index": rp.index,
        "width": rp.width,
        "height": rp.height,
        "unit": rp.unit,
        "image_size": (rp.image_width, rp.image_height),
        "truncated": (res.finish_reason in ("length", "loop")) if res.finish_reason else None,
        "fill_raw": res.extra.get("fill_raw"),
    }


def result_page(
    res: EngineResult,
    status: str,
    model_error: str | None,
    rp: RenderedPage,
    parsed: Page | BaseException | None,
    *,
    engine_s: float,
    default_engine: str,
    keep_raw: bool,
) -> Page:
    """The page as the Document keeps it: the parsed page (None when the page failed before parsing,
    an exception when parsing broke) with the engine's account (status, attempts, tokens, timings)."""
    if status == "failed" or parsed is None:
        page = Page(
            index=rp.index,
            width=rp.width,
            height=rp.height,
            unit=rp.unit,
            status="failed",
            image_width=rp.image_width,
            image_height=rp.image_height,
        )
    elif isinstance(parsed, BaseException):  # the parser never throws; a crashed worker can
        page = Page(index=rp.index, width=rp.width, height=rp.height, unit=rp.unit, status="failed")
        model_error, status = f"postprocess: {parsed}", "failed"
    else:
        page = parsed
    page.status = PageStatus(status)
    page.engine = res.engine or default_engine or None
    page.attempts = res.attempts
    page.prompt_tokens, page.completion_tokens = res.prompt_tokens, res.completion_tokens
    page.error = model_error
    page.truncated = status == "ok" and res.finish_reason == "length"
    page.looped = status == "ok" and res.finish_reason == "loop"
    # the engine's own time for the page (request to answer, retries included), else the wait around it
    page.timings = PageTimings(render_s=rp.render_s, engine_s=res.elapsed_s or engine_s, parse_s=page.timings.parse_s)
    if keep_raw:
        page.raw = res.raw
    return page


def document_model(engine_name: str, model_name: str, model_engine: bool) -> str:
    """What the Document says read it: the model profile, or the engine when it is no model (lite)."""
    return model_name if model_engine else engine_name


def assemble_document(path: str, info: SourceInfo, pages: list[Page], model: str) -> Document:
    return Document(
        source=Source(path=path, sha256=info.sha256, type=info.type, page_count=info.page_count),
        model=model,
        metadata=Summary.of(pages),
        pages=pages,
    )
