"""lite on a scanned two-column paper whose gutter OCR's box padding hides (#30.2, the held-out AIP sample
page read across its columns): a full-width title and abstract, then a bold lead paragraph in the left
column beside a bold sans-serif section heading in the right one (a larger box, padded more), justified
columns a quarter inch apart. Rasterised at 150 dpi, turned 0.5 degree, with noise: the boxes of the two
columns come within less than a line height of each other, though their ink is well apart."""

from __future__ import annotations

from pathlib import Path

import pytest
from rapidfuzz.distance import Levenshtein

from ocrserve.engines.lite.column_gaps import ink_gutters
from ocrserve.engines.lite.grid import OcrLine
from tests.support.helpers import justify, letter_canvas, noisy_scan
from tests.support.lite import image_page_input, page_markdown

ABSTRACT = (
    "A survey of tidal channels describes how the sediment of a delta moves between the seasons and how the "
    "pilots of a small harbour keep their charts of the bar up to date."
)
LEAD = (
    "The lead paragraph is set in bold type across the left column only and summarises the whole survey "
    "for a reader who has no time for the details of the measurements described below."
)
LEFT = (
    "Sediment moves through the delta in pulses that follow the seasonal floods of the river. "
    "Engineers measure the depth of each channel and the speed of the water at fixed stations. "
    "The survey team repeated the soundings every spring and compared them with older maps. "
) * 2
HEADING = "A. Second-level heading: Formatting"
RIGHT = (
    "Harbour pilots keep their own charts of the bar and share them with the port office each week. "
    "Storms move the sand in a single night, so the charts are redrawn after every gale. "
) * 4


def _column(c, text: str, x: float, y: float, width: float, font: str, size: float = 10, lead: float = 12) -> float:
    from reportlab.lib.utils import simpleSplit

    lines = simpleSplit(text, font, size, width)
    for k, ln in enumerate(lines):
        justify(c, x, y, ln, width, font, size, k == len(lines) - 1)
        y -= lead
    return y


def paper(path: Path) -> Path:
    c = letter_canvas(path, "Helvetica-Bold", 15)
    c.drawCentredString(306, 740, "Tidal Channels of a Small Delta")
    y = _column(c, ABSTRACT, 100, 710, 412, "Times-Roman")
    colw, gutter = 243, 18
    left_x, right_x, top = 54, 54 + colw + gutter, y - 24
    y = _column(c, LEAD, left_x, top, colw, "Times-Bold")
    c.setFont("Helvetica-Bold", 10)
    c.drawString(left_x, y - 14, "I. FIRST-LEVEL HEADING")
    _column(c, LEFT, left_x, y - 36, colw, "Times-Roman")
    c.setFont("Helvetica-Bold", 11)
    c.drawString(right_x, top, HEADING)
    _column(c, RIGHT, right_x, top - 22, colw, "Times-Roman")
    c.save()
    return path


@pytest.fixture(scope="module")
def page(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("gaps")
    return noisy_scan(paper(d / "paper.pdf"), d / "paper.png", dpi=150, angle=0.5, seed=11, sigma=10)


def _words(text: str) -> list[str]:
    return [w.strip(".,:") for w in text.split() if w.strip(".,:")]


def test_columns_whose_boxes_nearly_touch_are_read_one_after_the_other(page):
    md, _ = page_markdown(image_page_input(page))
    body = _words(md.split("bar up to date.", 1)[1])
    left = _words(LEAD) + ["I", "FIRST-LEVEL", "HEADING"] + _words(LEFT)
    right = _words(HEADING) + _words(RIGHT)
    assert body[:8] == left[:8], md
    # the right column (its heading first) comes after every word of the left one
    assert body.index("Second-level") >= len(left) - 2, md
    assert Levenshtein.normalized_similarity(body, left + right) >= 0.9, md


def _ocr(text: str, x0: float, y0: float, x1: float, pad: float = 8) -> OcrLine:
    """A padded box of a line whose words' ink runs from x0 to x1."""
    ws = text.split()
    step = (x1 - x0) / len(ws)
    words = tuple((w, x0 + k * step, x0 + (k + 1) * step - 4) for k, w in enumerate(ws))
    return OcrLine(text, x0 - pad, y0, x1 + pad, y0 + 24, words=words)


def test_ink_gutters_need_rows_of_running_text_on_both_sides():
    prose = "the sand moves in a single night"
    two = [l for k in range(5) for l in (_ocr(prose, 100, 30 * k, 500), _ocr(prose, 530, 30 * k, 930))]
    (x,) = ink_gutters(two, 24)
    assert 500 < x < 530
    assert ink_gutters(two[:4], 24) == []  # two rows are not enough
    cells = [l for k in range(5) for l in (_ocr(prose, 100, 30 * k, 500), _ocr("12.50", 530, 30 * k, 600))]
    assert ink_gutters(cells, 24) == []  # a column of numbers beside text: no column of running text
