"""How big a page image is, at each step from the source to the model: the same arithmetic as Chandra's
own client (`chandra-ocr`), written as pure functions of sizes so that tests can hold them against it.

1. PDF pages render whole at max(pdf_dpi, the scale that makes the shorter side min_short_side px)
   (`pdf_scale`); images whose either side is under min_image_side are upscaled so that their shorter
   side is min_image_side (`image_upscale_size`, sizes truncated as upstream does).
2. The client's fit (`client_fit_size`): Chandra 1 scales an image above max_pixels of area down (sides
   floored) and one below min_pixels up (sides ceiled); Chandra 2 puts every image on a 28-px grid
   within [min_pixels, max_pixels] of area, trading a block of the grid for the least change of
   aspect ratio. Both resample with LANCZOS (raster.py does the resizing).
3. The server's processor (Qwen2/3-VL `smart_resize`) then snaps the image to its patch grid
   (patch size x spatial merge = 32 for both models) within its own pixel bounds
   (`server_size`): what the vision tower finally sees. ocrserve sends upstream's image and lets the
   server do this step, as upstream does: no page is cropped or padded on the client.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

# the most one side of an image may be longer than the other: the models' image processor (Qwen-VL's
# smart_resize) refuses a longer strip, and the lite engine's detector squeezes one to nothing
MAX_ASPECT = 200


@dataclass(frozen=True)
class Budget:
    """A profile's page-image sizes, small enough to send to the render workers."""

    pdf_dpi: float = 192.0
    min_short_side: int = 1024
    min_image_side: int = 1536
    max_pixels: int = 3072 * 2048
    min_pixels: int = 28 * 28
    client_grid: int | None = None  # Chandra 2: 28 (sides on this grid before sending); Chandra 1: none
    patch_multiple: int = 32  # the server's grid: patch size x spatial merge
    server_min_pixels: int = 56 * 56
    server_max_pixels: int = 3072 * 2048

    @classmethod
    def from_profile(cls, p) -> Budget:
        return cls(
            p.pdf_dpi,
            p.min_short_side,
            p.min_image_side,
            p.max_pixels,
            p.min_pixels,
            p.client_grid,
            p.patch_multiple,
            p.server_min_pixels,
            p.server_max_pixels,
        )


def pdf_scale(w: float, h: float, budget: Budget) -> float:
    """The render scale of a w x h pt page (upstream: dpi = max(192, 1024 / shorter side * 72); scale = dpi / 72)."""
    dpi = max((budget.min_short_side / min(w, h)) * 72, budget.pdf_dpi)
    return dpi / 72


def image_upscale_size(w: int, h: int, budget: Budget) -> tuple[int, int]:
    """An image's size after the small-image upscale (unchanged when both sides reach min_image_side)."""
    m = budget.min_image_side
    if w < m or h < m:
        scale = m / min(w, h)
        return int(w * scale), int(h * scale)
    return w, h


def client_fit_size(w: int, h: int, budget: Budget) -> tuple[int, int]:
    """The size the client sends (upstream's `scale_to_fit`), for an image of w x h."""
    if w <= 0 or h <= 0:
        return w, h
    if budget.client_grid:
        return _grid_fit(w, h, budget.max_pixels, budget.min_pixels, budget.client_grid)
    px = w * h
    if px > budget.max_pixels:
        f = (budget.max_pixels / px) ** 0.5
        return math.floor(w * f), math.floor(h * f)
    if px < budget.min_pixels:
        f = (budget.min_pixels / px) ** 0.5
        return math.ceil(w * f), math.ceil(h * f)
    return w, h


def _grid_fit(w: int, h: int, max_pixels: int, min_pixels: int, g: int) -> tuple[int, int]:
    ar = w / h
    px = w * h
    scale = 1.0
    if px > max_pixels:
        scale = (max_pixels / px) ** 0.5
    elif px < min_pixels:
        scale = (min_pixels / px) ** 0.5
    wb, hb = max(1, round(w * scale / g)), max(1, round(h * scale / g))
    while wb * hb * g * g > max_pixels:
        if wb == 1 and hb == 1:
            break
        if wb == 1:
            hb -= 1
        elif hb == 1:
            wb -= 1
        elif abs((wb - 1) / hb - ar) < abs(wb / (hb - 1) - ar):
            wb -= 1
        else:
            hb -= 1
    return wb * g, hb * g


def server_size(w: int, h: int, budget: Budget) -> tuple[int, int]:
    """What the server's image processor resizes a w x h image to (Qwen-VL `smart_resize`): the vision
    tower's input. Used for token estimates and to document what the model sees."""
    f, lo, hi = budget.patch_multiple, budget.server_min_pixels, budget.server_max_pixels
    hh, ww = round(h / f) * f, round(w / f) * f
    if hh * ww > hi:
        beta = math.sqrt((h * w) / hi)
        hh, ww = max(f, math.floor(h / beta / f) * f), max(f, math.floor(w / beta / f) * f)
    elif hh * ww < lo:
        beta = math.sqrt(lo / (h * w))
        hh, ww = math.ceil(h * beta / f) * f, math.ceil(w * beta / f) * f
    return ww, hh
