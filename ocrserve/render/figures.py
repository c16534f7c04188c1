"""Figure crops: Image, Figure and Diagram blocks cut from the page image."""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from PIL import Image

from ocrserve.labels import FIGURE_LABELS
from ocrserve.png import decode_png, encode_pixels, encode_png
from ocrserve.render.markdown import block_markdown
from ocrserve.render.png_rows import png_size, top_rows

log = logging.getLogger(__name__)

if TYPE_CHECKING:
    from ocrserve.document import Block, Page


def figure_boxes(page: Page, width: int, height: int) -> list[tuple[Block, tuple[int, int, int, int]]]:
    """The figure blocks of `page` with a box worth cropping, and that box in the pixels of a
    `width` x `height` page image (left, top, right, bottom; within the image)."""
    out = []
    for b in page.blocks:
        if b.label not in FIGURE_LABELS or b.bbox_source == "missing":
            continue
        if len(b.bbox_norm) != 4 or not all(math.isfinite(v) for v in b.bbox_norm):
            continue
        x0, y0, x1, y1 = (min(max(v, 0.0), 1.0) for v in b.bbox_norm)
        box = (int(x0 * width), int(y0 * height), int(round(x1 * width)), int(round(y1 * height)))
        if box[2] - box[0] < 4 or box[3] - box[1] < 4:
            log.debug("figure block %d of page %d too small to crop: %s", b.index, page.index, box)
            continue
        out.append((b, box))
    return out


def crop_figures(page: Page, image: Image.Image, out_dir: Path, prefix: str, *, fmt: str = "png") -> list[Path]:
    """Save a crop of every figure block of `page` under out_dir/images and set block.figure."""
    _check_format(fmt)
    return _write_crops(page, figure_boxes(page, *image.size), image.crop, out_dir, prefix, fmt)


def crop_figures_png(page: Page, png: bytes, out_dir: Path, prefix: str, *, fmt: str = "png") -> list[Path]:
    """crop_figures on the page image `png`, the same files: a PNG of encode_pixels' is inflated only
    down to the lowest figure's last row, and its crops are cut from those rows as they lie, without
    copying the page; any other PNG is decoded whole."""
    _check_format(fmt)
    size = png_size(png)
    if size is not None:
        boxes = figure_boxes(page, *size)
        if not boxes:
            return []
        rows = top_rows(png, max(box[3] for _, box in boxes))
        if rows is not None:
            return _write_crops(page, boxes, lambda box: rows[box[1] : box[3], box[0] : box[2]], out_dir, prefix, fmt)
    image = decode_png(png)
    return _write_crops(page, figure_boxes(page, *image.size), image.crop, out_dir, prefix, fmt)


def _check_format(fmt: str) -> None:
    if fmt not in ("png", "jpg", "jpeg"):
        raise ValueError(f"figure format {fmt!r}: use png or jpeg")


def _write_crops(
    page: Page,
    boxes: list[tuple[Block, tuple[int, int, int, int]]],
    cut: Callable[[tuple[int, int, int, int]], Image.Image | np.ndarray],
    out_dir: Path,
    prefix: str,
    fmt: str,
) -> list[Path]:
    written: list[Path] = []
    for b, box in boxes:
        rel = f"images/{prefix}_p{page.index + 1}_b{b.index}.{fmt}"
        path = out_dir / rel
        path.parent.mkdir(exist_ok=True)  # out_dir itself must exist: a cancelled run removed it on purpose
        crop = cut(box)
        if isinstance(crop, np.ndarray):  # 8-bit gray or RGB rows of our own PNG: encode_png's own input
            if fmt == "png":
                path.write_bytes(encode_pixels(crop))
            else:
                Image.fromarray(np.ascontiguousarray(crop)).save(path, format="JPEG", quality=90)
        else:
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
