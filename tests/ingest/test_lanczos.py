"""The native LANCZOS resampler (ocrserve/ingest/_lanczos.c) gives Pillow's pixels, bit for bit: over
random sizes in both pass orders, gray and RGB, noise, hard 0/255 edges (the clipping), white pages with
dark specks (the white shortcuts), on the AVX2 sums and on plain C; and resize.py falls back to Pillow
where the native resampler would not give its pixels."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

from ocrserve.imagesize import Budget
from ocrserve.ingest import raster, resize

LANCZOS = Image.Resampling.LANCZOS


def _pillow(a: np.ndarray, size: tuple[int, int]) -> np.ndarray:
    return np.asarray(Image.fromarray(a).resize(size, LANCZOS))


def _images(rng: np.random.Generator, h: int, w: int, rgb: bool):
    shape = (h, w, 3) if rgb else (h, w)
    yield rng.integers(0, 256, shape, np.uint8)
    yield ((rng.random(shape) < 0.5) * 255).astype(np.uint8)
    specks = np.full(shape, 255, np.uint8)
    specks[rng.random(shape) < 0.02] = 0
    yield specks
    text = np.full(shape, 255, np.uint8)  # a page: white margins and rows, dark lines of text in between
    for y in range(h // 5, h - h // 5, 7):
        text[y : y + 2, w // 8 : w - w // 8] = rng.integers(0, 120)
    yield text


@pytest.fixture(params=[True, False], ids=["simd", "plain-c"])
def simd(request):
    assert resize._native is not None, "the native resampler is not built (pip install -e . needs a C compiler)"
    resize._native.simd(request.param)
    yield request.param
    resize._native.simd(True)


def test_native_is_built_and_agrees_with_this_pillow():
    assert resize._native is not None, "the native resampler is not built (pip install -e . needs a C compiler)"
    assert resize.native_rule() in (0, 1)


def test_random_sizes_both_orders_bit_exact(simd):
    rule = resize.native_rule()
    assert rule is not None
    rng = np.random.default_rng(5)
    compared = 0
    for _ in range(60):
        w, h = int(rng.integers(1, 90)), int(rng.integers(1, 90))
        ow, oh = int(rng.integers(1, 120)), int(rng.integers(1, 120))
        for a in _images(rng, h, w, rgb=bool(rng.integers(0, 2))):
            assert np.array_equal(resize._native_resize(a, (ow, oh), rule), _pillow(a, (ow, oh))), (a.shape, ow, oh)
            compared += 1
    assert compared == 240


@pytest.mark.parametrize(
    ("w", "h", "ow", "oh"),
    [
        (1632, 2112, 1624, 2100),  # Chandra 2's fit of a letter page: a few pixels off each axis
        (1700, 2200, 1288, 1666),  # Chandra 1's kind: down by a quarter (9 taps)
        (600, 2400, 580, 700),  # the height shrinks most: vertical first in Pillow 13
        (330, 450, 1290, 1750),  # a small scan upscaled
        (1632, 2112, 1632, 2100),  # one axis
        (1632, 2112, 1624, 2112),
    ],
)
def test_page_sizes_bit_exact(simd, w, h, ow, oh):
    rng = np.random.default_rng(w + oh)
    for a in _images(rng, h, w, rgb=True):
        for b in (a, np.ascontiguousarray(a[..., 1])):
            assert np.array_equal(resize.lanczos(b, (ow, oh)), _pillow(b, (ow, oh))), b.shape


def test_the_self_check_tells_the_orders_apart():
    """The self-check can fail: the rule that is not this Pillow's gives other pixels on its cases."""
    rule = resize.native_rule()
    other = 1 - rule
    cases = resize._self_check_cases()
    assert any(not np.array_equal(resize._native_resize(a, s, other), _pillow(a, s)) for a, s in cases)


class _OneOff:
    """The native resampler one level off on every pixel, as another Pillow's rounding would be."""

    def __init__(self, real):
        self.real = real

    def resize(self, src, w, h, c, dst, ow, oh, rule):
        self.real.resize(src, w, h, c, dst, ow, oh, rule)
        dst ^= 1


def test_a_disagreeing_native_resampler_is_not_used(monkeypatch):
    monkeypatch.setattr(resize, "_native", _OneOff(resize._native))
    resize.native_rule.cache_clear()
    try:
        assert resize.native_rule() is None
        a = np.random.default_rng(1).integers(0, 256, (40, 30), np.uint8)
        assert np.array_equal(resize.lanczos(a, (20, 50)), _pillow(a, (20, 50)))
        img = Image.fromarray(a)
        assert np.array_equal(np.asarray(resize.lanczos_image(img, (20, 50))), _pillow(a, (20, 50)))
    finally:
        monkeypatch.undo()
        resize.native_rule.cache_clear()
    assert resize.native_rule() in (0, 1)


def test_modes_pillow_resizes_otherwise_go_to_pillow():
    """RGBA (Pillow resizes it premultiplied) and other modes are Pillow's; so is everything with use_native off."""
    rng = np.random.default_rng(2)
    rgba = rng.integers(0, 256, (30, 40, 4), np.uint8)
    assert np.array_equal(resize.lanczos(rgba, (25, 21)), _pillow(rgba, (25, 21)))
    img = Image.fromarray(rgba, "RGBA")
    assert np.array_equal(np.asarray(resize.lanczos_image(img, (25, 21))), np.asarray(img.resize((25, 21), LANCZOS)))
    p = img.convert("P")
    assert resize.lanczos_image(p, (25, 21)).tobytes() == p.resize((25, 21), LANCZOS).tobytes()


def test_fit_pixels_is_pillows_fit_with_and_without_the_native_resampler(monkeypatch):
    budget = Budget(client_grid=28, min_pixels=28 * 28 * 4, max_pixels=28 * 28 * 6000)
    rng = np.random.default_rng(3)
    page = next(_images(rng, 2112, 1632, rgb=True))
    gray = np.repeat(np.asarray(list(_images(rng, 2112, 1632, rgb=False))[3])[..., None], 3, axis=2)
    for a in (page, gray):
        native = raster.fit_pixels(a, budget)
        monkeypatch.setattr(resize, "use_native", False)
        pillow = raster.fit_pixels(a, budget)
        monkeypatch.setattr(resize, "use_native", True)
        assert native.shape[:2] != a.shape[:2]
        assert np.array_equal(native, pillow)


def test_bad_buffers_are_refused():
    src = np.zeros((10, 10), np.uint8)
    with pytest.raises(ValueError, match="buffer sizes"):
        resize._native.resize(src, 10, 11, 1, np.empty((5, 5), np.uint8), 5, 5, 1)
    with pytest.raises(ValueError, match="positive"):
        resize._native.resize(src, 10, 10, 1, np.empty((5, 5), np.uint8), 5, 5, 2)
    with pytest.raises(TypeError):  # read-only output
        resize._native.resize(src, 10, 10, 1, b"\0" * 25, 5, 5, 1)


@pytest.mark.parametrize("clean", [True, False], ids=["zeroupper", "dirty"])
def test_same_pixels_after_isal_with_and_without_zeroupper(clean):
    """ISA-L's deflate (every page's PNG) leaves the vector registers' upper halves dirty; the native code clears
    them at entry (a speed matter only: bench/results/simd-upper-2026-12-06/). Either way its pixels are Pillow's
    and numpy's."""
    isal_zlib = pytest.importorskip("isal.isal_zlib")
    from ocrserve import png

    rule = resize.native_rule()
    assert rule is not None and png._native is not None
    rng = np.random.default_rng(9)
    try:
        for native in (resize._native, png._native):
            assert native.zeroupper(clean) in (True, False)
        for a in _images(rng, 70, 90, rgb=True):
            isal_zlib.compress(a.tobytes(), 1)
            assert np.array_equal(resize._native_resize(a, (61, 47), rule), _pillow(a, (61, 47)))
            gray = np.repeat(a[..., :1], 3, axis=2)
            isal_zlib.compress(gray.tobytes(), 1)
            assert np.array_equal(png.gray_channel(gray), gray[..., 0])
    finally:
        for native in (resize._native, png._native):
            native.zeroupper(True)
