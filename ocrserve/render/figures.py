"""Figure crops: Image, Figure and Diagram blocks cut from the page image."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from .markdown import FIGURE_LABELS, block_markdown

if TYPE_CHECKING:
    from PIL import Image

    from ..document import Page


def crop_figures(page: "Page", image: "Image.Image", out_dir: Path, prefix: str, *, fmt: str = "png") -> list[Path]:
    """Save a crop of every figure block of `page` under out_dir/images and set block.figure."""
    written: list[Path] = []
    W, H = image.size
    for b in page.blocks:
        if b.label not in FIGURE_LABELS or b.bbox_source == "missing":
            continue
        x0, y0, x1, y1 = b.bbox_norm
        box = (int(x0 * W), int(y0 * H), int(round(x1 * W)), int(round(y1 * H)))
        if box[2] - box[0] < 4 or box[3] - box[1] < 4:
            continue
        rel = f"images/{prefix}_p{page.index + 1}_b{b.index}.{fmt}"
        path = out_dir / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        crop = image.crop(box)
        if crop.mode not in ("RGB", "L"):
            crop = crop.convert("RGB")
        crop.save(path, format="PNG" if fmt == "png" else "JPEG", compress_level=1) if fmt == "png" else crop.save(path, "JPEG", quality=90)
        b.figure = rel
        b.markdown = block_markdown(b)
        written.append(path)
    return written
