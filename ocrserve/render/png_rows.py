"""The top rows of a page PNG of `ocrserve.png.encode_pixels` (8-bit gray or RGB, rows unfiltered, one
deflate stream), inflated no further than the rows asked for: the figure crops need the page down to
the lowest figure's last row, not the whole page inflated and copied again (issue 28, item 5).

Any PNG `ocrserve.png.decode_png` would not read itself (another writer's, filtered rows, a palette,
16 bits, interlaced, too large for Pillow's bomb check, a short stream) answers None here: the caller
decodes it whole as before."""

from __future__ import annotations

import numpy as np

from ocrserve.png import _deflate, own_header


def png_size(png: bytes) -> tuple[int, int] | None:
    """(width, height) of a PNG of encode_pixels' kind, from its header (nothing inflated); else None."""
    head = own_header(png)
    return None if head is None else (head[0], head[1])


def top_rows(png: bytes, rows: int) -> np.ndarray | None:
    """The first `rows` rows of the pixels, (rows, W) gray or (rows, W, 3) RGB, as a view of the inflated
    rows (not contiguous); None when the PNG is not of encode_pixels' kind or its rows are filtered."""
    head = own_header(png)
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
