"""The bitmap a page is rendered into, white before pdfium draws: the same bytes, for less work.

pypdfium2's `PdfPage.render` makes its bitmap (`bitmap_maker`: by default a zeroed ctypes buffer),
then fills it with the fill colour through `FPDFBitmap_FillRect` (opaque white: every byte 255 in the
BGR, BGRx and BGRA layouts, whatever the byte order) and then renders into it. pdfium's fill walks the
bitmap pixel by pixel (about 4 ms for a 1632 x 2112 page on the development VM, a third of the render);
here the buffer is made white by numpy in one memset, and that one fill is skipped, so pdfium draws the
page onto exactly the bytes its own fill would have left (tests/ingest/test_white_bitmap.py holds the
renders equal). Any other fill (another colour, a part of the bitmap, another format) goes to pdfium.
"""

from __future__ import annotations

import ctypes

import numpy as np
import pypdfium2.internal as pdfium_i
import pypdfium2.raw as pdfium_c
from pypdfium2 import PdfBitmap

_WHITE = (255, 255, 255, 255)
# the layouts where opaque white is 255 in every byte (B, G, R and x/A), in either byte order
_FORMATS = frozenset((pdfium_c.FPDFBitmap_BGR, pdfium_c.FPDFBitmap_BGRx, pdfium_c.FPDFBitmap_BGRA))


class _WhiteBitmap(PdfBitmap):
    """A bitmap whose packed buffer is already opaque white: the fill of the whole bitmap with white
    (what render() does first) has nothing left to do."""

    def fill_rect(self, color, left, top, width, height) -> None:
        whole = (left, top, width, height) == (0, 0, self.width, self.height)
        if whole and tuple(color) == _WHITE and self.format in _FORMATS and not getattr(self, "_filled", False):
            self._filled = True  # only the first fill, on the untouched buffer, is known to be a no-op
            return
        super().fill_rect(color, left, top, width, height)


def white_bitmap(width: int, height: int, format: int, rev_byteorder: bool = False) -> PdfBitmap:
    """pypdfium2's `bitmap_maker`: PdfBitmap.new_native's packed bitmap, its buffer 255 throughout (numpy's,
    kept alive by the ctypes array over it, which the bitmap holds, as to_numpy's views do)."""
    n = width * pdfium_i.BitmapTypeToNChannels[format] * height
    buf = np.full(n, 255, dtype=np.uint8)
    return _WhiteBitmap.new_native(
        width, height, format, rev_byteorder=rev_byteorder, buffer=(ctypes.c_ubyte * n).from_buffer(buf)
    )
