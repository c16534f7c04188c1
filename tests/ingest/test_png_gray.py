"""The native gray test and channel copy (ocrserve/_gray.c) give numpy's answer and bytes: the same pages
found gray, the same channel, the same PNGs, with its vector path and its plain C, on sizes that leave
every tail length, on padded and strided rows, and with one coloured byte anywhere."""

from __future__ import annotations

import numpy as np
import pytest

from ocrserve import png


@pytest.fixture(params=[True, False], ids=["simd", "plain"])
def native(request):
    assert png._native is not None, "the native gray test is not built (pip install -e . needs a C compiler)"
    png._native.simd(request.param)
    yield png._native
    png._native.simd(True)


def _numpy(a: np.ndarray) -> np.ndarray | None:
    return np.ascontiguousarray(a[..., 0]) if (a == a[..., :1]).all() else None


def _gray_rgb(rng: np.random.Generator, h: int, w: int) -> np.ndarray:
    return np.repeat(rng.integers(0, 256, (h, w, 1), dtype=np.uint8), 3, axis=2)


def test_gray_pages_give_their_channel_on_every_tail_length(native):
    rng = np.random.default_rng(1)
    for w in [*range(1, 50), 63, 64, 65, 1632, 1275]:
        a = _gray_rgb(rng, 7, w)
        got = png.gray_channel(a)
        assert got is not None and got.flags.c_contiguous, w
        assert np.array_equal(got, a[..., 0]), w


def test_one_coloured_byte_anywhere_makes_the_page_colour(native):
    """Every pixel position of a row, every channel (R too): a shuffle that took one channel's byte from
    its neighbour would miss some of these."""
    rng = np.random.default_rng(2)
    for w in (5, 16, 17, 33, 48, 50):
        base = _gray_rgb(rng, 3, w)
        for x in range(w):
            for c in range(3):
                a = base.copy()
                a[1, x, c] ^= 1 + rng.integers(255)
                assert png.gray_channel(a) is None, (w, x, c)
                a[1, x, c] = base[1, x, 0]  # the same byte put back: gray again
                assert png.gray_channel(a) is not None


def test_padded_strided_and_reversed_rows_give_numpys_answer(native):
    rng = np.random.default_rng(3)
    g = _gray_rgb(rng, 40, 37)
    padded = np.zeros((40, 37 * 3 + 9), np.uint8)
    padded[:, : 37 * 3] = g.reshape(40, -1)
    views = [
        padded[:, : 37 * 3].reshape(40, 37, 3),  # rows longer than their pixels (pdfium's stride)
        g[::3],  # every third row
        g[:, ::-1],  # reversed pixels: numpy's path
        g[::-1],  # rows bottom up: numpy's path
        g[5:30, 4:20],  # a window
    ]
    assert views[0].strides[0] == padded.strides[0]  # a view, not a copy: the native path reads the padding
    for v in views:
        assert np.array_equal(png.gray_channel(v), _numpy(v))
        c = v.copy()
        c[-1, -1, 1] ^= 1
        assert png.gray_channel(c) is None and _numpy(c) is None


def test_the_pngs_are_byte_identical_to_numpys(native, monkeypatch):
    rng = np.random.default_rng(4)
    colour = rng.integers(0, 256, (31, 45, 3), dtype=np.uint8)
    pages = [_gray_rgb(rng, 33, 50), _gray_rgb(rng, 2, 1), colour, colour[..., 0].copy(), _gray_rgb(rng, 9, 16)[::2]]
    for a in pages:
        ours = png.encode_pixels(a)
        monkeypatch.setattr(png, "use_native", False)
        theirs = png.encode_pixels(a)
        monkeypatch.setattr(png, "use_native", True)
        assert ours == theirs
        assert np.array_equal(
            np.asarray(png.decode_png(ours).convert("RGB")),
            np.broadcast_to(a[..., None], (*a.shape, 3)) if a.ndim == 2 else a,
        )


def test_bad_buffers_are_refused_with_a_reason(native):
    out = np.empty((4, 5), np.uint8)
    with pytest.raises(ValueError, match="src must be"):
        native.plane(np.zeros((4, 5, 4), np.uint8), out, 0)  # four channels
    with pytest.raises(ValueError, match="src must be"):
        native.plane(np.zeros((4, 5, 3), np.uint16), out, 0)
    with pytest.raises(ValueError, match="dst must be"):
        native.plane(np.zeros((4, 5, 3), np.uint8), out, 1)  # no room for the offset
    with pytest.raises(ValueError, match="dst must be"):
        native.plane(np.zeros((3, 5, 3), np.uint8), out, 0)  # other height
    wide = png.gray_channel(np.full((4, 5, 3), 300, np.uint16))  # other dtypes: numpy's test and copy
    assert wide is not None and wide.dtype == np.uint16 and (wide == 300).all()
