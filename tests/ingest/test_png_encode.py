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
