"""The lite engine's "usable text layer" decision and its layout rules, on small PDFs built here."""

from __future__ import annotations

import random

import numpy as np
import pypdfium2 as pdfium
from PIL import Image
from reportlab.lib.utils import ImageReader
from reportlab.pdfgen import canvas

from ocrserve.engines.lite.layout import build_blocks, reading_order
from ocrserve.ingest.pdf.textlayer import Line, analyze_page, text_quality

WORDS = (
    "the river carries fine sand toward the sea and the delta grows a little every year while "
    "engineers measure the flow at many stations along the main channel"
).split()


def _sentence(rng: random.Random, n: int = 9) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n))


def _garbage(rng: random.Random, n: int = 9) -> str:
    return " ".join("".join(rng.choice("bcdfghjklmnpqrstvwxzQXZ") for _ in range(rng.randint(4, 8))) for _ in range(n))


def _scan_image(w: int = 600, h: int = 800) -> ImageReader:
    a = np.full((h, w), 255, np.uint8)
    a[100:110, 50:550] = 0
    return ImageReader(Image.fromarray(a).convert("RGB"))


def _pdf(
    path, lines: list[str], *, mode: int = 0, image: tuple[float, float, float, float] | None = None
) -> pdfium.PdfPage:
    c = canvas.Canvas(str(path), pagesize=(400, 500))
    if image:
        c.drawImage(_scan_image(), *image)
    for i, text in enumerate(lines):
        t = c.beginText(30, 460 - 14 * i)
        t.setFont("Helvetica", 10)
        t.setTextRenderMode(mode)
        t.textLine(text)
        c.drawText(t)
    c.save()
    return pdfium.PdfDocument(str(path))[0]


def test_text_quality_separates_words_from_garbage():
    rng = random.Random(1)
    good = text_quality(" ".join(_sentence(rng) for _ in range(10)))
    bad = text_quality(" ".join(_garbage(rng) for _ in range(10)))
    assert good.good() and good.good(strict=True)
    assert not bad.good()
    assert not text_quality("\ufffd\ufffd\ufffd\ue001\ue002 abc").good()
    assert not text_quality("   ").good()


def test_usable_visible_text_layer(tmp_path):
    rng = random.Random(2)
    rep = analyze_page(_pdf(tmp_path / "a.pdf", [_sentence(rng) for _ in range(12)]))
    assert rep.verdict == "text" and len(rep.lines) == 12 and rep.invisible_share == 0


def test_no_text_layer_is_ocrd(tmp_path):
    rep = analyze_page(_pdf(tmp_path / "b.pdf", [], image=(0, 0, 400, 500)))
    assert rep.verdict == "ocr_page" and "no text layer" in rep.reason


def test_invisible_garbage_ocr_layer_is_ocrd_again(tmp_path):
    rng = random.Random(3)
    rep = analyze_page(_pdf(tmp_path / "c.pdf", [_garbage(rng) for _ in range(12)], mode=3, image=(0, 0, 400, 500)))
    assert rep.verdict == "ocr_page" and "invisible" in rep.reason and rep.invisible_share == 1.0


def test_invisible_good_ocr_layer_is_used_unless_distrusted(tmp_path):
    rng = random.Random(4)
    page = _pdf(tmp_path / "d.pdf", [_sentence(rng) for _ in range(12)], mode=3, image=(0, 0, 400, 500))
    assert analyze_page(page).verdict == "text"
    assert analyze_page(page, trust_invisible=False).verdict == "ocr_page"


def test_garbled_visible_layer_is_ocrd(tmp_path):
    rng = random.Random(5)
    rep = analyze_page(_pdf(tmp_path / "e.pdf", [_garbage(rng) for _ in range(12)]))
    assert rep.verdict == "ocr_page" and "garbled" in rep.reason


def test_partial_text_layer(tmp_path):
    rng = random.Random(6)
    # a scanned body under a born-digital stamp: OCR the whole page
    big = analyze_page(_pdf(tmp_path / "f.pdf", [_sentence(rng)], image=(0, 0, 400, 440)))
    assert big.verdict == "ocr_page" and "images without text" in big.reason
    # a text page with a picture: text layer plus the picture region to OCR
    small = analyze_page(_pdf(tmp_path / "g.pdf", [_sentence(rng) for _ in range(10)], image=(30, 40, 200, 200)))
    assert small.verdict == "ocr_regions" and len(small.ocr_regions) == 1 and len(small.lines) == 10
    x0, y0, x1, y1 = small.ocr_regions[0]
    assert abs(x0 - 30) < 1 and abs(y1 - (500 - 40)) < 1  # top-left origin, y down


def _col(x: float, y0: float, n: int, prefix: str, gap_after: int | None = None) -> list[Line]:
    out, y = [], y0
    for i in range(n):
        out.append(Line(f"{prefix} line {i} of running text here", x, y, x + 200, y + 10, size=9))
        y += 12 + (10 if gap_after is not None and i == gap_after else 0)
    return out


def test_two_columns_with_aligned_paragraph_gaps_read_column_by_column():
    # both columns have a paragraph gap at the same height: a plain XY-cut would interleave them
    left = _col(40, 100, 10, "L", gap_after=4)
    right = _col(260, 100, 10, "R", gap_after=4)
    title = [Line("A Title Across Both Columns", 40, 60, 460, 80, size=18)]
    order = reading_order([*right, *title, *left], min_gap=8)
    texts = [l.text[0] for l in order]
    assert texts[0] == "A" and texts[1:11] == ["L"] * 10 and texts[11:] == ["R"] * 10


def test_blocks_headings_lists_and_tables():
    lines = [
        Line("Big Title", 40, 40, 200, 62, size=20),
        Line("A first paragraph line that is long enough to be body", 40, 80, 400, 91, size=9),
        Line("and its second line.", 40, 92, 160, 103, size=9),
        Line("\u2022 first item", 40, 120, 150, 131, size=9),
        Line("\u2022 second item", 40, 133, 160, 144, size=9),
        *[
            Line(t, x, y, x + 40, y + 11, size=9)
            for y, row in ((170, ("Name", "Qty", "Cost")), (184, ("Bolt", "4", "1.20")), (198, ("Nut", "9", "0.40")))
            for x, t in zip((40, 160, 280), row)
        ],
    ]
    blocks = build_blocks(lines, 500, 700)
    labels = [b.label for b in blocks]
    assert labels == ["Section-Header", "Text", "List-Group", "Table"], labels
    assert blocks[0].html == "<h1>Big Title</h1>"
    assert blocks[1].html == "<p>A first paragraph line that is long enough to be body and its second line.</p>"
    assert blocks[2].html == "<ul><li>first item</li><li>second item</li></ul>"
    assert "<th>Name</th>" in blocks[3].html and "<td>0.40</td>" in blocks[3].html
