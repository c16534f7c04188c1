"""Figure crops from the page PNG (finish_page): the page inflated only down to the lowest figure's last
row and the crops cut from those rows (render/png_rows.py, render/figures.py crop_figures_png), the same
files as decoding the whole page and cropping it."""

from __future__ import annotations

import io

import numpy as np
import pytest
from PIL import Image

from ocrserve import parse_output
from ocrserve import png as pngmod
from ocrserve.pipeline.page import finish_page
from ocrserve.png import decode_png, encode_pixels
from ocrserve.profiles import load_profile
from ocrserve.render import png_rows
from ocrserve.render.figures import crop_figures, crop_figures_png

W, H = 320, 480


def _pixels(color: bool, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    gray = rng.integers(0, 256, (H, W), dtype=np.uint8)
    if not color:
        return np.repeat(gray[..., None], 3, axis=2)
    return rng.integers(0, 256, (H, W, 3), dtype=np.uint8)


def _raw(*boxes: str, label: str = "Image") -> str:
    return "".join(
        f'<div data-bbox="{b}" data-label="{label}"><img alt="figure {i}"/></div>' for i, b in enumerate(boxes)
    )


CASES = [
    _raw("[100, 50, 500, 300]"),
    _raw("[0, 0, 1024, 1024]"),  # the whole page: every row
    _raw("[10, 600, 1000, 1024]", "[300, 0, 700, 200]"),  # the lowest reaches the last row
    _raw("[33, 17, 977, 611]", "[0, 101, 37, 999]") + _raw("[400, 400, 600, 450]", label="Diagram"),
    _raw("[0, 0, 3, 3]"),  # too small to crop
    '<div data-label="Image"><img alt="no box"/></div>',
]


def _files(tmp, page) -> dict[str, bytes]:
    return {p.relative_to(tmp).as_posix(): p.read_bytes() for p in sorted(tmp.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("color", [False, True])
@pytest.mark.parametrize("fmt", ["png", "jpg"])
@pytest.mark.parametrize("raw", CASES)
def test_crops_are_those_of_the_whole_page_decoded(tmp_path, raw, fmt, color):
    png = encode_pixels(_pixels(color))
    whole, rows = tmp_path / "whole", tmp_path / "rows"
    whole.mkdir(), rows.mkdir()
    a, b = parse_output(raw, "chandra-1", (612, 792)), parse_output(raw, "chandra-1", (612, 792))
    crop_figures(a, decode_png(png), whole, "d", fmt=fmt)
    crop_figures_png(b, png, rows, "d", fmt=fmt)
    assert _files(whole, a) == _files(rows, b)
    assert [x.figure for x in a.blocks] == [x.figure for x in b.blocks]
    assert [x.markdown for x in a.blocks] == [x.markdown for x in b.blocks]


def test_another_writers_png_is_decoded_whole(tmp_path):
    px = _pixels(True, 3)
    buf = io.BytesIO()
    Image.fromarray(px).save(buf, format="PNG")  # Pillow's: filtered rows
    png = buf.getvalue()
    assert png_rows.top_rows(png, 10) is None
    whole, rows = tmp_path / "whole", tmp_path / "rows"
    whole.mkdir(), rows.mkdir()
    a, b = (parse_output(CASES[3], "chandra-1", (612, 792)) for _ in range(2))
    crop_figures(a, decode_png(png), whole, "d")
    crop_figures_png(b, png, rows, "d")
    assert _files(whole, a) == _files(rows, b) != {}


class _Counting:
    """The deflate module with every inflated byte counted."""

    def __init__(self, real):
        self.real, self.out = real, 0

    def decompressobj(self, *a, **k):
        obj, outer = self.real.decompressobj(*a, **k), self

        class _Obj:
            def decompress(self, data, max_length=0):
                got = obj.decompress(data, max_length)
                outer.out += len(got)
                return got

        return _Obj()

    def __getattr__(self, name):
        return getattr(self.real, name)


def test_finish_page_inflates_the_page_only_down_to_the_lowest_figure(tmp_path, monkeypatch):
    png = encode_pixels(_pixels(False))  # gray: one byte a pixel, one filter byte a row
    counting = _Counting(pngmod._deflate)
    monkeypatch.setattr(pngmod, "_deflate", counting)
    monkeypatch.setattr(png_rows, "_deflate", counting)
    raw = '<div data-bbox="[0, 0, 1024, 60]" data-label="Text"><p>Title</p></div>' + _raw("[100, 100, 900, 400]")
    page = finish_page(
        raw,
        load_profile("chandra-1"),
        index=0,
        width=612,
        height=792,
        unit="pt",
        image_size=(W, H),
        png=png,
        staging=str(tmp_path),
        prefix="d",
    )
    lowest = round(400 / 1024 * H)
    assert page.blocks[1].figure == "images/d_p1_b1.png"
    assert counting.out == lowest * (W + 1) < H * (W + 1)  # was: the whole page
    with Image.open(tmp_path / page.blocks[1].figure) as crop:
        box = (int(100 / 1024 * W), int(100 / 1024 * H), round(900 / 1024 * W), lowest)
        assert np.array_equal(np.asarray(crop), _pixels(False)[box[1] : box[3], box[0] : box[2], 0])
