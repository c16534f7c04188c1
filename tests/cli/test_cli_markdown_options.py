"""`ocrserve convert --paginate --no-images` with the default lite engine (#26.6): the Markdown has
chandra's page separators and no image lines, and no figure crop is written."""

from __future__ import annotations

from pathlib import Path

from ocrserve.render.markdown import PAGE_RULE
from tests.cli.support import cli


def _pdf_with_a_figure(path: Path, pages: int = 3) -> Path:
    """Text on every page (different on each: no running header), a picture without text on page 1
    (the lite engine makes it a figure and crops it)."""
    import numpy as np
    from PIL import Image
    from reportlab.lib.utils import ImageReader
    from reportlab.pdfgen import canvas

    c = canvas.Canvas(str(path), pagesize=(612, 792))
    for i in range(pages):
        c.setFont("Helvetica", 11)
        for j in range(4):
            c.drawString(
                72,
                700 - 16 * j,
                f"Page {i + 1} sentence {j}: {'alpha beta gamma delta'.split()[(i + j) % 4]} "
                f"words number {i * 10 + j} for the reader.",
            )
        if i == 0:
            noise = (np.random.default_rng(0).random((200, 300)) * 255).astype("uint8")
            c.drawImage(ImageReader(Image.fromarray(noise).convert("RGB")), 72, 300, width=300, height=200)
        c.showPage()
    c.save()
    return path


def _convert(tmp_path: Path, *flags: str) -> tuple[str, Path]:
    src = tmp_path / "doc.pdf"
    if not src.exists():
        _pdf_with_a_figure(src)
    out = tmp_path / ("out" + "".join(flags).replace("-", "_"))
    r = cli("convert", str(src), "-o", str(out), "-q", *flags)
    assert r.returncode == 0, r.stderr
    return (out / "doc" / "doc.md").read_text(encoding="utf-8"), out / "doc"


def _images(folder: Path) -> list[Path]:
    return sorted((folder / "images").iterdir()) if (folder / "images").is_dir() else []


def test_default_run_links_the_figure_crop(tmp_path):
    md, folder = _convert(tmp_path)
    crops = _images(folder)
    assert len(crops) == 1 and f"](images/{crops[0].name})" in md
    assert PAGE_RULE not in md


def test_no_images_writes_no_crop_and_no_image_line(tmp_path):
    md, folder = _convert(tmp_path, "--no-images")
    assert _images(folder) == []
    assert "![" not in md and "images/" not in md
    assert "Page 1 sentence 0" in md and "Page 3 sentence 3" in md


def test_paginate_and_no_images(tmp_path):
    md, folder = _convert(tmp_path, "--paginate", "--no-images")
    assert _images(folder) == []
    assert "![" not in md and "images/" not in md
    lines = md.splitlines()
    assert [ln for ln in lines if ln.endswith(PAGE_RULE)] == [f"1{PAGE_RULE}", f"2{PAGE_RULE}"]
    first, second = lines.index(f"1{PAGE_RULE}"), lines.index(f"2{PAGE_RULE}")
    assert "Page 1 sentence" in "\n".join(lines[:first])
    assert "Page 2 sentence" in "\n".join(lines[first:second]) and "Page 3 sentence" in "\n".join(lines[second:])


def test_options_reach_convert_options():
    from ocrserve.pipeline.options import ConvertOptions

    opts = ConvertOptions.build(paginate=True, figures=False)
    assert opts.paginate is True and opts.figures is False
    assert ConvertOptions().paginate is False
