"""The top rows of a page PNG of `ocrserve.png.encode_pixels` (8-bit gray or RGB, rows unfiltered, one
deflate stream), inflated no further than the rows asked for: the figure crops need the page down to
the lowest figure's last row, not the whole page inflated and copied again (issue 28, item 5).

Any PNG `ocrserve.png.decode_png` would not read itself (another writer's, filtered rows, a palette,
16 bits, interlaced, too large for Pillow's bomb check, a short stream) answers None here: the caller
decodes it whole as before."""

from __future__ import annotations

import numpy as np
from PIL import Image

from ocrserve.png import _deflate

_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def _header(png: bytes) -> tuple[int, int, int, list[bytes]] | None:
    """(width, height, bytes a pixel, the IDAT chunks' data) of a PNG of encode_pixels' kind, else None."""
    if png[:8] != _SIGNATURE:
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


def png_size(png: bytes) -> tuple[int, int] | None:
    """(width, height) of a PNG of encode_pixels' kind, from its header (nothing inflated); else None."""
    head = _header(png)
    return None if head is None else (head[0], head[1])


def top_rows(png: bytes, rows: int) -> np.ndarray | None:
    """The first `rows` rows of the pixels, (rows, W) gray or (rows, W, 3) RGB, as a view of the inflated
    rows (not contiguous); None when the PNG is not of encode_pixels' kind or its rows are filtered."""
    head = _header(png)
    if head is None or not 0 < rows:
        return None
    w, h, bpp, idat = head
    rows = min(rows, h)
    stride = w * bpp + 1
    try:  # inflate stops once the rows asked for are out
        raw = _deflate.decompressobj().decompress(b"".join(idat), rows * stride)
    except Exception:  # noqa: BLE001 - a damaged stream: the whole decode says what is wrong
        return None
    if len(raw) != rows * stride:
        return None
    packed = np.frombuffer(raw, dtype=np.uint8).reshape(rows, stride)
    if packed[:, 0].any():  # filtered rows: Pillow undoes the filters
        return None
    px = packed[:, 1:]
    return px if bpp == 1 else px.reshape(rows, w, 3)
