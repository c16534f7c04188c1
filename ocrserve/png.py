"""Page images and figure crops as PNG: lossless, and cheap to write.

The model sees exactly the pixels given: a gray image is written as 8-bit grayscale (decoded to
RGB it is the same image) and the PNG is the simplest valid one (no row filter, one deflate stream
at level 1, ISA-L's where it is installed), a few milliseconds for a 1632x2112 page.
"""

from __future__ import annotations

import importlib
import io
import zlib
from types import ModuleType
from typing import Any

import numpy as np
from PIL import Image

_deflate: ModuleType
try:  # ISA-L's deflate: the same zlib stream as zlib's, several times faster at level 1
    from isal import isal_zlib as _deflate
except ImportError:  # no wheel for this platform: the standard library's
    _deflate = zlib

_native: Any
try:  # the gray test and channel copy in one pass (ocrserve/_gray.c); numpy's where it is not built
    _native = importlib.import_module("ocrserve._gray")
except ImportError:
    _native = None

__all__ = ["decode_png", "encode_pixels", "encode_png", "gray_channel"]

# False: numpy's gray test and copy for every page (the bench's "before"; processes forked later inherit it)
use_native = True


def encode_png(img: Image.Image) -> bytes:
    """The page image as PNG, lossless: the model sees exactly these pixels (see encode_pixels).
    Modes other than 8-bit L and RGB go through Pillow's encoder."""
    if img.mode not in ("L", "RGB"):
        buf = io.BytesIO()
        img.save(buf, format="PNG", compress_level=1)
        return buf.getvalue()
    return encode_pixels(np.asarray(img))


def encode_pixels(a: np.ndarray, *, stored: bool = False) -> bytes:
    """8-bit pixels, (H, W) gray or (H, W, 3) RGB, as PNG, lossless.

    A page whose pixels are all gray (R = G = B, most text pages) is written as 8-bit grayscale: a
    third of the bytes to compress and send, and decoded to RGB (as vLLM and the engines do) it is
    the same image, pixel for pixel. The PNG itself is the simplest valid one (no row filter, one
    deflate stream at level 1, ISA-L's where installed): a few milliseconds a page. `stored`: the
    deflate stream's blocks stored, not compressed (zlib level 0): the same pixels in about ten times the
    bytes, which a reader copies rather than inflates.
    """
    h, w = a.shape[:2]
    raw = _gray_plane(a, w + 1, 1) if a.ndim == 3 else None  # the gray page's rows, one channel
    color = 2 if a.ndim == 3 and raw is None else 0
    if raw is None:
        raw = np.empty((h, w * (3 if color else 1) + 1), dtype=np.uint8)
        raw[:, 1:] = a.reshape(h, -1)
    raw[:, 0] = 0  # the filter byte of each row: none
    ihdr = w.to_bytes(4, "big") + h.to_bytes(4, "big") + bytes((8, color, 0, 0, 0))
    return (
        b"\x89PNG\r\n\x1a\n"
        + _png_chunk(b"IHDR", ihdr)
        + _png_chunk(b"IDAT", zlib.compress(raw.tobytes(), 0) if stored else _deflate.compress(raw, 1))
        + _png_chunk(b"IEND", b"")
    )


def gray_channel(a: np.ndarray) -> np.ndarray | None:
    """The one channel of (H, W, 3) pixels that are all gray (R = G = B), as a contiguous (H, W) array;
    None when any pixel has colour. Resampled (LANCZOS) or written as PNG, that channel gives each of the
    three channels' pixels exactly, for a third of the work."""
    return _gray_plane(a, a.shape[1], 0)


def _gray_plane(a: np.ndarray, width: int, offset: int) -> np.ndarray | None:
    """R of (H, W, 3) 8-bit pixels that are all gray, in columns offset .. offset + W of a new (H, width)
    array (the other columns unset); None when any pixel has colour. Natively in one pass where built
    (the same bytes: tests/ingest/test_png_gray.py), else the test below and a copy."""
    h, w = a.shape[:2]
    out = np.empty((h, width), dtype=a.dtype)
    packed = a.dtype == np.uint8 and a.strides[1:] == (3, 1) and a.strides[0] >= 3 * w  # rows top down
    if _native is not None and use_native and packed:
        return out if _native.plane(a, out, offset) else None
    if not _is_gray(a):
        return None
    out[:, offset : offset + w] = a[..., 0]
    return out


def _is_gray(a: np.ndarray, rows: int = 128) -> bool:
    """R = G = B at every pixel of (H, W, 3) `a`; bands of rows, so a colour page stops early.

    Each band's row bytes are compared with themselves shifted by one (one contiguous pass, 2x faster
    than comparing the strided channel views); the comparisons across a pixel boundary (every third,
    B of one pixel with R of the next) are masked out."""
    h, w = a.shape[:2]
    out = np.empty((min(rows, h), 3 * w - 1), dtype=bool)
    for y in range(0, h, rows):
        band = a[y : y + rows].reshape(-1, 3 * w)  # a view where the rows are packed, else a copy of the band
        o = out[: band.shape[0]]
        np.not_equal(band[:, 1:], band[:, :-1], out=o)
        o[:, 2::3] = False
        if o.any():
            return False
    return True


def _png_chunk(kind: bytes, data: bytes) -> bytes:
    return len(data).to_bytes(4, "big") + kind + data + (zlib.crc32(kind + data) & 0xFFFFFFFF).to_bytes(4, "big")


def decode_png(png: bytes) -> Image.Image:
    """A PNG as a loaded Pillow image. The PNGs encode_pixels writes (8-bit gray or RGB, rows unfiltered)
    are read by inflating their one stream, without Pillow's decoder; any other PNG goes through Pillow."""
    a = _own_pixels(png)
    if a is None:
        img = Image.open(io.BytesIO(png))
        img.load()
        return img
    return Image.fromarray(a, "L" if a.ndim == 2 else "RGB")


def own_header(png: bytes) -> tuple[int, int, int, list[bytes]] | None:
    """(width, height, bytes a pixel, the IDAT chunks' data) of a PNG of encode_pixels' kind (8-bit gray or
    RGB, not interlaced, no palette or other critical chunk, within Pillow's bomb check), else None."""
    if png[:8] != b"\x89PNG\r\n\x1a\n":
        return None
    pos, ihdr, idat = 8, None, []
    while pos + 8 <= len(png):
        n = int.from_bytes(png[pos : pos + 4], "big")
        kind = png[pos + 4 : pos + 8]
        data = png[pos + 8 : pos + 8 + n]
        pos += 12 + n
        if kind == b"IHDR":
            ihdr = data
        elif kind == b"IDAT":
            idat.append(data)
        elif kind == b"IEND":
            break
        elif kind[0] & 0x20 == 0:  # an unknown critical chunk (a palette, ...): not one of ours
            return None
    if ihdr is None or len(ihdr) != 13 or not idat:
        return None
    w, h = int.from_bytes(ihdr[0:4], "big"), int.from_bytes(ihdr[4:8], "big")
    depth, color, _, _, interlace = ihdr[8:13]
    if depth != 8 or color not in (0, 2) or interlace or not w or not h:
        return None
    limit = Image.MAX_IMAGE_PIXELS
    if limit and w * h > 2 * limit:  # Pillow's decompression-bomb error, not our inflate, answers that
        return None
    return w, h, 1 if color == 0 else 3, idat


def _own_pixels(png: bytes) -> np.ndarray | None:
    head = own_header(png)
    if head is None:
        return None
    w, h, bpp, idat = head
    expected = h * (w * bpp + 1)
    try:  # never inflate more than the header's size allows (a small stream can claim gigabytes)
        raw = _deflate.decompressobj().decompress(b"".join(idat), expected + 1)
    except Exception:  # noqa: BLE001 - a damaged stream: let Pillow say what is wrong
        return None
    if len(raw) != expected:
        return None
    rows = np.frombuffer(raw, dtype=np.uint8).reshape(h, w * bpp + 1)
    if rows[:, 0].any():  # filtered rows: Pillow undoes the filters
        return None
    px = np.ascontiguousarray(rows[:, 1:])
    return px if bpp == 1 else px.reshape(h, w, 3)
