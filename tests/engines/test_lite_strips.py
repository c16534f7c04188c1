"""Thin strips (#29.15): a 10,000 x 10 px image fails alone at once with a reason naming its size (it
was a render stuck for minutes, or lite's empty "ResizeImgError: "), and a 200:1 strip with text is
read by lite; the CLI prints no traceback."""

from __future__ import annotations

import json

from PIL import Image, ImageDraw

from tests.cli.support import cli


def _strip(path, size, text=True):
    img = Image.new("RGB", size, "white")
    if text:
        d = ImageDraw.Draw(img)
        for x in range(0, size[0] - 200, 120):
            d.text((x, max(0, size[1] // 2 - 6)), f"word{x}", fill="black")
    img.save(path)
    return path


def test_thin_strips_with_lite(tmp_path, monkeypatch):
    monkeypatch.setenv("OCRSERVE_RENDER_TIMEOUT_S", "60")  # the old code's stuck render fails, not hangs
    src = tmp_path / "in"
    src.mkdir()
    _strip(src / "wide.png", (10000, 10), text=False)
    _strip(src / "tall.png", (10, 10000), text=False)
    _strip(src / "band.png", (2000, 10))
    out = tmp_path / "out"
    r = cli("convert", str(src), "-o", str(out), "--engine", "lite", "--json-log")
    assert r.returncode == 1, r.stderr
    assert "Traceback" not in r.stderr
    done = {e["name"]: e for e in map(json.loads, r.stdout.splitlines()) if e["event"] == "doc_done"}
    assert done["band"]["status"] == "ok"
    for name, size in (("wide", "10000x10"), ("tall", "10x10000")):
        assert done[name]["status"] == "failed"
        assert (
            f"image {size} px is too elongated to read (sides 1000:1; OCR reads images up to 200:1)"
            in (done[name]["error"])
        )
    assert (out / "band" / "band.json").is_file()
