"""The per-page steps every scheduler (local asyncio, Ray Data) runs: the fallback rule, and raw engine
output -> finished Page (parse, figure crops; runs in the render workers, off the event loop)."""

from __future__ import annotations

import io
import time
from pathlib import Path
from typing import Awaitable, Callable

from ocrserve.document import Page, PageTimings
from ocrserve.engines.base import Engine, EngineResult, PageInput
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
        from PIL import Image

        from ocrserve.render.figures import crop_figures

        with Image.open(io.BytesIO(png)) as img:
            crop_figures(page, img.convert("RGB"), Path(staging), prefix)
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
