"""LANCZOS resizing with Pillow's numbers, faster on document pages (ocrserve/ingest/_lanczos.c).

The client resizes a page with `img.resize(size, Image.Resampling.LANCZOS)`; every pixel ocrserve sends
must be the pixel that gives. `lanczos` gives it from the native resampler, which computes Pillow's
arithmetic (its coefficients, fixed point, clipped 8-bit pass between the axes, and the order of the
passes) with shortcuts for white runs and vector sums; where it is not built (no C compiler at install)
or disagrees with the installed Pillow on a self-check at first use (a Pillow whose arithmetic changed,
another libm), Pillow itself resizes. tests/ingest/test_lanczos.py compares the two bit for bit.
"""

from __future__ import annotations

import functools
import importlib
import logging
from typing import Any

import numpy as np
from PIL import Image

log = logging.getLogger(__name__)

_native: Any
try:
    _native = importlib.import_module("ocrserve.ingest._lanczos")
except ImportError:  # not built: Pillow resizes
    _native = None

# False puts Pillow back for every resize (the bench's "before"; processes forked later inherit it)
use_native = True

# Pillow's orders of the two passes: 0, horizontal first (Pillow up to 12); 1, vertical first when the
# height shrinks by more than twice what the width does (Pillow 13)
_RULES = (1, 0)


def _native_resize(a: np.ndarray, size: tuple[int, int], rule: int) -> np.ndarray:
    a = np.ascontiguousarray(a, dtype=np.uint8)
    h, w = a.shape[:2]
    c = 1 if a.ndim == 2 else a.shape[2]
    ow, oh = size
    out = np.empty((oh, ow) if a.ndim == 2 else (oh, ow, c), np.uint8)
    _native.resize(a, w, h, c, out, ow, oh, rule)
    return out


def _pillow(a: np.ndarray, size: tuple[int, int]) -> np.ndarray:
    return np.asarray(Image.fromarray(a).resize(size, Image.Resampling.LANCZOS))


def _self_check_cases() -> list[tuple[np.ndarray, tuple[int, int]]]:
    """Small images whose resizes tell the orders apart and exercise every path: noise, hard 0/255 edges,
    white with dark specks, gray and RGB, down and up, one axis and both."""
    rng = np.random.default_rng(28)
    cases: list[tuple[np.ndarray, tuple[int, int]]] = []
    for (w, h), size in (
        ((41, 97), (37, 23)),  # the height shrinks most: vertical first in Pillow 13
        ((97, 41), (23, 37)),
        ((53, 61), (50, 58)),  # a page's fit: a few pixels off each axis
        ((19, 23), (61, 47)),  # upscale
        ((64, 33), (64, 20)),  # one axis
        ((33, 64), (20, 64)),
    ):
        noise = rng.integers(0, 256, (h, w), np.uint8)
        edges = ((rng.random((h, w)) < 0.5) * 255).astype(np.uint8)
        specks = np.where(rng.random((h, w)) < 0.03, 0, 255).astype(np.uint8)
        rgb = rng.integers(0, 256, (h, w, 3), np.uint8)
        cases += [(noise, size), (edges, size), (specks, size), (rgb, size)]
    return cases


@functools.cache
def native_rule() -> int | None:
    """The order rule with which the native resampler gives the installed Pillow's pixels on every case
    of the self-check; None when it is not built or no rule does (Pillow then resizes)."""
    if _native is None:
        return None
    cases = [(a, size, _pillow(a, size)) for a, size in _self_check_cases()]
    for rule in _RULES:
        if all(np.array_equal(_native_resize(a, size, rule), ref) for a, size, ref in cases):
            return rule
    log.warning("the native LANCZOS resampler differs from this Pillow's; Pillow resizes the pages")
    return None


def lanczos(a: np.ndarray, size: tuple[int, int]) -> np.ndarray:
    """(H, W) or (H, W, C) uint8 pixels resized to size (width, height) as Pillow's LANCZOS resizes them."""
    rule = native_rule() if use_native else None
    if rule is None or a.dtype != np.uint8 or not (a.ndim == 2 or (a.ndim == 3 and a.shape[2] == 3)):
        return _pillow(a, size)  # (Pillow resizes RGBA premultiplied: not these sums)
    return _native_resize(a, size, rule)


def lanczos_image(img: Image.Image, size: tuple[int, int]) -> Image.Image:
    """A Pillow image resized as `img.resize(size, Image.Resampling.LANCZOS)` resizes it; L and RGB images by
    the native resampler (when it is in use), any other mode by Pillow."""
    rule = native_rule() if use_native else None
    if rule is None or img.mode not in ("L", "RGB"):
        return img.resize(size, Image.Resampling.LANCZOS)
    return Image.fromarray(_native_resize(np.asarray(img), size, rule), img.mode)
