"""lite on tables it was never tuned on (#30.3), on documents generated here: images of tables with narrow
numeric columns (with and without rules, noisy), a table beside a column of body text (PDF and scan), a
table continued on the next page (PDF and scan), and a small table crop (read at its own scale)."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pypdfium2 as pdfium
import pytest
from PIL import Image, ImageDraw, ImageFont

from ocrserve import load_profile, parse_output
from ocrserve.engines.lite.engine import lite_raw_for
from ocrserve.engines.lite.rapid import DET_SHORT_SIDE, _fit, ocr_lines
from tests.support.helpers import letter_canvas
from tests.support.lite import image_page_input, pdf_page_input

PROFILE = load_profile("chandra-1")
SANS = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"
SANS_BOLD = "/usr/share/fonts/truetype/dejavu/DejaVuSans-Bold.ttf"

ROWS = [
    ["Region", "2019", "2020", "2021", "Share"],
    ["North", "55.3", "40.0", "59.1", "12%"],
    ["South", "61.2", "48.7", "50.9", "0%"],
    ["East", "7.4", "8.8", "9.0", "31%"],
    ["West", "102.5", "99.9", "101.3", "57%"],
    ["Total", "226.4", "197.4", "220.3", "100%"],
]
BODY = [
    "Sediment moves through the delta in pulses that follow",
    "the seasonal floods of the river. Engineers measure the",
    "depth of each channel and the speed of the water at fixed",
    "stations. The survey team repeated the soundings every",
    "spring and compared them with older maps of the coast.",
    "Most of the silt settles near the mouth where the current",
    "slows down and spreads out over the wide shallow flats.",
    "Farmers upstream notice the change in their fields first.",
]


def _noisy(img: Image.Image, sigma: float, seed: int = 3) -> Image.Image:
    a = np.asarray(img.convert("L")).astype(np.float32)
    a += np.random.default_rng(seed).normal(0, sigma, a.shape)
    return Image.fromarray(np.clip(a, 0, 255).astype(np.uint8)).convert("RGB")


def table_image(path: Path, rules: bool, size: int = 22) -> Path:
    """ROWS drawn tight: a name column, four narrow right-aligned numeric columns, a bold header."""
    widths, pad = [160, 80, 80, 80, 80], 10
    font, bold = ImageFont.truetype(SANS, size), ImageFont.truetype(SANS_BOLD, size)
    rh = int(size * 1.9)
    img = Image.new("L", (sum(widths) + 80, rh * len(ROWS) + 80), 255)
    d = ImageDraw.Draw(img)
    for r, row in enumerate(ROWS):
        x = 40
        for c, (text, w) in enumerate(zip(row, widths)):
            f = bold if r == 0 else font
            tx = x + pad if c == 0 else x + w - pad - d.textlength(text, font=f)
            d.text((tx, 40 + r * rh + (rh - size) / 2), text, font=f, fill=0)
            x += w
    if rules:
        for r in range(len(ROWS) + 1):
            d.line([(40, 40 + r * rh), (40 + sum(widths), 40 + r * rh)], fill=0, width=2)
        x = 40
        for w in [0, *widths]:
            x += w
            d.line([(x, 40), (x, 40 + rh * len(ROWS))], fill=0, width=2)
    _noisy(img, 8).save(path)
    return path


def _blocks(page) -> list:
    return parse_output(
        lite_raw_for(page, PROFILE), PROFILE, (page.width, page.height), index=page.index, unit=page.unit
    ).blocks


def _grid(block) -> list[list[str]]:
    rows = re.findall(r"<tr>(.*?)</tr>", block.html, re.S)
    return [
        [re.sub(r"<[^>]+>", "", c).strip() for c in re.findall(r"<t[hd][^>]*>(.*?)</t[hd]>", r, re.S)] for r in rows
    ]


def _tables(blocks) -> list:
    return [b for b in blocks if b.label == "Table"]


@pytest.mark.parametrize("rules", [False, True])
def test_table_image_keeps_narrow_columns_and_header(tmp_path, rules):
    """An image of a table is one table: every number in its own cell (no "55.3 40.0 59.1"), the
    header row (years are column heads, not data) as <th>, no cell as a heading."""
    page = image_page_input(table_image(tmp_path / "t.png", rules))
    blocks = _blocks(page)
    tables = _tables(blocks)
    assert len(tables) == 1, [(b.label, b.text[:60]) for b in blocks]
    assert _grid(tables[0]) == ROWS
    assert tables[0].html.count("<th") == 5
    assert not [b for b in blocks if b.label == "Section-Header"]


def _beside_pdf(path: Path) -> Path:
    c = letter_canvas(path, size=10)
    y = 700
    for ln in BODY * 2:
        c.drawString(50, y, ln)
        y -= 14
    rows = [["Station", "Depth", "Flow", "Silt"]] + [
        [f"S-{i}", f"{3 + i * 0.7:.1f}", f"{120 + i * 13}", f"{i * 4}%"] for i in range(1, 12)
    ]
    y = 700
    for r, row in enumerate(rows):
        c.setFont("Helvetica-Bold" if r == 0 else "Helvetica", 10)
        for x, t in zip([340, 410, 460, 510], row):
            c.drawString(x, y, t)
        y -= 16
    c.save()
    return path


def _continued_pdf(path: Path) -> Path:
    c = letter_canvas(path)
    c.drawString(72, 740, "Annual figures for the delta stations are listed below.")
    c.setFont("Helvetica-Bold", 10)
    for x, t in zip([72, 200, 300, 400], ["Name", "Depth", "Flow", "Change"]):
        c.drawString(x, 700, t)
    y = 684
    c.setFont("Helvetica", 10)
    for i in range(1, 60):
        if y < 60:
            c.showPage()
            c.setFont("Helvetica", 10)
            y = 740
        for x, t in zip([72, 200, 300, 400], [f"Item {i}", f"{i * 3.5:.1f}", f"{100 + i * 7}", f"{i % 5}.{i % 7}%"]):
            c.drawString(x, y, t)
        y -= 16
    c.save()
    return path


def _scan(pdf: Path, png: Path, index: int = 0) -> Path:
    doc = pdfium.PdfDocument(str(pdf))
    img = doc[index].render(scale=200 / 72).to_pil()
    doc.close()
    _noisy(img, 10, seed=5).save(png)
    return png


@pytest.fixture(scope="module")
def docs(tmp_path_factory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("tables")
    beside, cont = _beside_pdf(d / "beside.pdf"), _continued_pdf(d / "continued.pdf")
    return {
        "beside.pdf": beside,
        "beside.png": _scan(beside, d / "beside.png"),
        "continued.pdf": cont,
        "continued.png": _scan(cont, d / "continued.png", 1),
    }


@pytest.mark.parametrize("kind", ["pdf", "png"])
def test_table_does_not_swallow_the_text_beside_it(docs, kind):
    path = docs[f"beside.{kind}"]
    page = pdf_page_input(path, 0) if kind == "pdf" else image_page_input(path)
    blocks = _blocks(page)
    tables = _tables(blocks)
    assert len(tables) == 1, [(b.label, b.text[:60]) for b in blocks]
    grid = _grid(tables[0])
    assert grid[0] == ["Station", "Depth", "Flow", "Silt"] and grid[1] == ["S-1", "3.7", "133", "4%"]
    assert len(grid) == 12 and all(len(r) == 4 for r in grid)
    text = " ".join(b.text for b in blocks if b.label == "Text")
    assert "Sediment moves through the delta" in text and "their fields first." in text


@pytest.mark.parametrize("kind", ["pdf", "png"])
def test_table_continued_on_next_page_stays_a_table(docs, kind):
    """Page 2 of a long table, without its header: its rows are a table, its first column is not taken
    for a running header ("Item 41" repeats "Item #" of page 1)."""
    page = pdf_page_input(docs["continued.pdf"], 1) if kind == "pdf" else image_page_input(docs["continued.png"])
    blocks = _blocks(page)
    tables = _tables(blocks)
    assert len(tables) == 1, [(b.label, b.text[:60]) for b in blocks]
    grid = _grid(tables[0])
    assert grid[0] == ["Item 41", "143.5", "387", "1.6%"]
    assert grid[-1] == ["Item 59", "206.5", "513", "4.3%"] and len(grid) == 19
    assert not [b for b in blocks if b.label != "Table"]


def test_small_image_is_read_at_its_own_scale(tmp_path):
    """A 250x45 px table crop goes to the detector scaled twice and padded, not scaled 16 times to the
    detector's short side (2.9 s); its words come back in the crop's pixels."""
    crop = Image.open(table_image(tmp_path / "t.png", False)).crop((40, 40, 290, 85))
    fitted, f = _fit(crop)
    assert f == 2.0 and fitted.size == (DET_SHORT_SIDE, DET_SHORT_SIDE)
    lines = ocr_lines(crop)
    assert [l.text for l in lines] == ["Region", "2019"]
    assert all(0 <= l.x0 < l.x1 <= 250 and 0 <= l.y0 < l.y1 <= 45 for l in lines)
    big = Image.new("RGB", (800, 600), "white")
    assert _fit(big) == (big, 1.0)
