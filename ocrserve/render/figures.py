"""Figure crops: Image, Figure and Diagram blocks cut from the page image."""

from __future__ import annotations

import logging
import math
from pathlib import Path
from typing import TYPE_CHECKING

from ocrserve.labels import FIGURE_LABELS
from ocrserve.png import encode_png
from ocrserve.render.markdown import block_markdown

log = logging.getLogger(__name__)

if TYPE_CHECKING:
    from PIL import Image

    from ocrserve.document import Page


def crop_figures(page: Page, image: Image.Image, out_dir: Path, prefix: str, *, fmt: str = "png") -> list[Path]:
    """Save a crop of every figure block of `page` under out_dir/images and set block.figure."""
    if fmt not in ("png", "jpg", "jpeg"):
        raise ValueError(f"figure format {fmt!r}: use png or jpeg")
    written: list[Path] = []
    W, H = image.size
    for b in page.blocks:
        if b.label not in FIGURE_LABELS or b.bbox_source == "missing":
            continue
        if len(b.bbox_norm) != 4 or not all(math.isfinite(v) for v in b.bbox_norm):
            continue
        x0, y0, x1, y1 = (min(max(v, 0.0), 1.0) for v in b.bbox_norm)
        box = (int(x0 * W), int(y0 * H), int(round(x1 * W)), int(round(y1 * H)))
        if box[2] - box[0] < 4 or box[3] - box[1] < 4:
            log.debug("figure block %d of page %d too small to crop: %s", b.index, page.index, box)
            continue
        rel = f"images/{prefix}_p{page.index + 1}_b{b.index}.{fmt}"
        path = out_dir / rel
        path.parent.mkdir(exist_ok=True)  # out_dir itself must exist: a cancelled run removed it on purpose
        crop = image.crop(box)
        if crop.mode not in ("RGB", "L"):
            crop = crop.convert("RGB")
        if fmt == "png":
            path.write_bytes(encode_png(crop))
        else:
            crop.save(path, format="JPEG", quality=90)
        b.figure = rel
        b.markdown = block_markdown(b)
        written.append(path)
    return written
