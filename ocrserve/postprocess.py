"""Raw engine output -> finished Page (parse, figure crops). Runs in the render workers, off the event loop."""

from __future__ import annotations

import io
import time
from pathlib import Path

from .document import Page, PageTimings
from .parse import parse_output
from .profiles import Profile
from .render.markdown import FIGURE_LABELS


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

        from .render.figures import crop_figures

        with Image.open(io.BytesIO(png)) as img:
            crop_figures(page, img.convert("RGB"), Path(staging), prefix)
    page.timings = PageTimings(parse_s=time.perf_counter() - t0)
    return page
