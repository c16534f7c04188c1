"""The page-image PNG: lossless, grayscale only when the page is gray, what decoders read back."""

from __future__ import annotations

import io
import random

from PIL import Image, ImageDraw

from ocrserve.engines.openai_http import png_size as _image_size
from ocrserve.ingest.raster import encode_png


def _page(color: bool, size=(333, 517), seed=0) -> Image.Image:
    rng = random.Random(seed)
    img = Image.new("RGB", size, "white")
    d = ImageDraw.Draw(img)
    for _ in range(60):
        x, y = rng.randrange(size[0]), rng.randrange(size[1])
        v = rng.randrange(256)
        fill = (v, rng.randrange(256), rng.randrange(256)) if color else (v, v, v)
        d.rectangle((x, y, x + rng.randrange(1, 40), y + rng.randrange(1, 12)), fill=fill)
    return img


def _decoded(png: bytes) -> Image.Image:
    img = Image.open(io.BytesIO(png))
    img.load()
    return img


def test_gray_page_is_written_as_grayscale_and_decodes_to_the_same_rgb():
    img = _page(color=False)
    png = encode_png(img)
    out = _decoded(png)
    assert out.mode == "L"
    assert out.convert("RGB").tobytes() == img.tobytes()  # what vLLM and the engines feed the model
    assert _image_size(png) == img.size


def test_colour_page_stays_rgb_pixel_for_pixel():
    img = _page(color=True, seed=3)
    out = _decoded(encode_png(img))
    assert out.mode == "RGB" and out.tobytes() == img.tobytes()


def test_a_single_coloured_pixel_keeps_the_page_rgb():
    img = _page(color=False, seed=5)
    img.putpixel((200, 300), (10, 11, 10))
    out = _decoded(encode_png(img))
    assert out.mode == "RGB" and out.tobytes() == img.tobytes()


def test_other_modes_fall_back_to_pillow_losslessly():
    img = _page(color=True, seed=7).convert("RGBA")
    out = _decoded(encode_png(img))
    assert out.mode == "RGBA" and out.tobytes() == img.tobytes()


def test_odd_sizes_and_grayscale_input():
    for size in [(1, 1), (7, 3), (1633, 5)]:
        img = _page(color=True, size=size, seed=size[0])
        assert _decoded(encode_png(img)).convert("RGB").tobytes() == img.tobytes()
    gray = _page(color=False, seed=9).convert("L")
    assert _decoded(encode_png(gray)).tobytes() == gray.tobytes()


def test_decode_reads_our_pngs_and_any_other_png_the_same_as_pillow():
    from ocrserve.png import _own_pixels, decode_png

    for img in (_page(color=False, seed=11), _page(color=True, seed=12), _page(color=True, size=(7, 3), seed=13)):
        ours = encode_png(img)
        assert _own_pixels(ours) is not None  # the fast path, no Pillow decoder
        assert decode_png(ours).convert("RGB").tobytes() == img.tobytes()
        buf = io.BytesIO()
        img.save(buf, format="PNG", optimize=True)  # Pillow's own: filtered rows
        other = buf.getvalue()
        assert _own_pixels(other) is None
        assert decode_png(other).tobytes() == img.tobytes()
    pal = _page(color=True, seed=14).convert("P")
    buf = io.BytesIO()
    pal.save(buf, format="PNG")
    assert decode_png(buf.getvalue()).convert("RGB").tobytes() == pal.convert("RGB").tobytes()


def test_pdf_pages_render_to_the_exact_target_size(tmp_path):
    """The whole page at upstream's size: nothing padded or cropped (the server snaps it to its grid)."""
    from reportlab.pdfgen import canvas

    from ocrserve.ingest.raster import Budget, pdf_page_pixels, pdf_target

    pdf = tmp_path / "sizes.pdf"
    c = canvas.Canvas(str(pdf))
    sizes = [(612, 792), (595.3, 841.9), (500, 333.3), (1190.6, 841.9)]
    for w, h in sizes:
        c.setPageSize((w, h))
        c.setFillColorRGB(1, 0, 0)
        c.rect(10, 10, 50, 50, fill=1)
        c.showPage()
    c.save()
    budget = Budget()
    for i in range(len(sizes)):
        a, pw, ph = pdf_page_pixels(str(pdf), i, budget)
        W, H = pdf_target(pw, ph, budget)
        assert a.shape == (H, W, 3) and a.dtype.name == "uint8"
        assert a[-60, 60].tolist() == [255, 0, 0]  # the red square at the bottom left is where it belongs
        assert a[0, 0].tolist() == [255, 255, 255]


def test_without_isal_the_standard_zlib_writes_the_same_pixels(monkeypatch):
    import zlib

    from ocrserve import png as pngmod

    img = _page(color=True, seed=21)
    fast = encode_png(img)
    monkeypatch.setattr(pngmod, "_deflate", zlib)
    slow = encode_png(img)
    assert _decoded(slow).tobytes() == _decoded(fast).tobytes() == img.tobytes()
    assert pngmod.decode_png(slow).tobytes() == img.tobytes()


def test_a_png_claiming_a_huge_size_is_not_inflated_by_the_fast_path():
    """A small stream whose header claims 30000 x 30000 pixels: the reader never inflates past what the
    header allows (and leaves the decompression-bomb verdict to Pillow)."""
    import zlib

    import pytest
    from PIL import Image

    from ocrserve.png import _own_pixels, _png_chunk, decode_png

    w = h = 30000
    ihdr = w.to_bytes(4, "big") + h.to_bytes(4, "big") + bytes((8, 0, 0, 0, 0))
    stream = zlib.compressobj(1)
    idat = stream.compress(bytes(4 * 1024 * 1024)) + stream.flush()  # 4 MiB of zeros: far less than claimed
    bomb = b"\x89PNG\r\n\x1a\n" + _png_chunk(b"IHDR", ihdr) + _png_chunk(b"IDAT", idat) + _png_chunk(b"IEND", b"")
    assert _own_pixels(bomb) is None
    with pytest.raises((Image.DecompressionBombError, OSError, ValueError)):
        decode_png(bomb)
    small = 3000
    ihdr2 = small.to_bytes(4, "big") + small.to_bytes(4, "big") + bytes((8, 0, 0, 0, 0))
    short = b"\x89PNG\r\n\x1a\n" + _png_chunk(b"IHDR", ihdr2) + _png_chunk(b"IDAT", idat) + _png_chunk(b"IEND", b"")
    assert _own_pixels(short) is None  # the stream holds fewer bytes than the header says: left to Pillow


def test_one_coloured_value_anywhere_keeps_the_page_rgb():
    """The gray test compares neighbouring bytes: a single channel off by one, in any channel, row band
    or column (the first and last included), makes the page RGB; equal neighbours across a pixel
    boundary (B of one pixel, R of the next) do not."""
    import numpy as np

    from ocrserve.png import _is_gray

    h, w = 300, 7
    base = np.repeat(np.arange(h * w, dtype=np.uint8).reshape(h, w)[..., None], 3, axis=2)
    assert _is_gray(base) and _is_gray(base[:, ::-1]) and _is_gray(base[::2])  # strided views too
    for y, x, c in [(0, 0, 0), (0, 0, 2), (127, 6, 1), (128, 3, 2), (299, 6, 2), (299, 0, 0), (200, 4, 1)]:
        a = base.copy()
        a[y, x, c] ^= 1
        assert not _is_gray(a), (y, x, c)
        assert not _is_gray(np.ascontiguousarray(a[:, ::-1])), (y, x, c)


def test_a_stored_png_holds_the_same_pixels_uncompressed():
    """encode_pixels(stored=True): deflate blocks stored (zlib level 0), what a reader copies rather than
    inflates; Pillow reads the same pixels, in gray and in colour, and the file is the raw rows' size."""
    import zlib

    import numpy as np

    from ocrserve.png import encode_pixels

    for img in (_page(color=False), _page(color=True)):
        a = np.asarray(img)
        packed, stored = encode_pixels(a), encode_pixels(a, stored=True)
        assert np.array_equal(np.asarray(Image.open(io.BytesIO(stored)).convert("RGB")), a)
        channels = 1 if np.asarray(Image.open(io.BytesIO(packed))).ndim == 2 else 3
        rows = a.shape[0] * (a.shape[1] * channels + 1)
        assert len(stored) >= rows > len(packed)
        idat = stored[stored.index(b"IDAT") + 4 :]
        assert zlib.decompressobj().decompress(idat[:2]) == b"" and idat[2] & 0x06 == 0  # block type 00: stored
