"""lite on scanned multi-column pages and drop caps (#30.2), on documents generated here: two justified
columns with a narrow gutter (under an em) and a drop cap, as a born-digital PDF and as a noisy, slightly
skewed scan of it, where RapidOCR joins the lines of both columns into one box; a one-column page is
not cut."""

from __future__ import annotations

from pathlib import Path

import pytest
from PIL import Image

from ocrserve.engines.lite.columns import split_columns
from ocrserve.engines.lite.rapid import ocr_lines
from tests.support.helpers import justify, letter_canvas, noisy_scan
from tests.support.lite import image_page_input, page_markdown, pdf_page_input

LEFT = (
    "Sediment moves through the delta in pulses that follow the seasonal floods of the river. "
    "Engineers measure the depth of each channel and the speed of the water at fixed stations. "
    "The survey team repeated the soundings every spring and compared them with older maps. "
) * 3
RIGHT = (
    "Harbour pilots keep their own charts of the bar and share them with the port office each week. "
    "Storms move the sand in a single night, so the charts are redrawn after every gale. "
) * 4


def two_columns(path: Path, gutter: float = 10, colw: float = 250, columns: int = 2) -> Path:
    """A title, then LEFT (opening with a drop cap over three lines) and RIGHT in justified columns."""
    from reportlab.lib.utils import simpleSplit

    c = letter_canvas(path, "Helvetica-Bold", 18)
    c.drawString(50, 740, "The Changing Delta")
    texts = [LEFT, RIGHT] if columns == 2 else [LEFT + RIGHT]
    width = colw if columns == 2 else 2 * colw + gutter
    for n, text in enumerate(texts):
        x, y = 50 + n * (colw + gutter), 700.0
        if n == 0:  # the drop cap, and the three lines beside it
            c.setFont("Times-Bold", 40)
            c.drawString(x, y - 26, text[0])
            c.setFont("Times-Roman", 11)
            head = simpleSplit(text[1:], "Times-Roman", 11, width - 32)[:3]
            for ln in head:
                justify(c, x + 32, y, ln, width - 32, "Times-Roman", 11, False)
                y -= 14
            text = text[1 + sum(len(h) + 1 for h in head) :]
        c.setFont("Times-Roman", 11)
        lines = simpleSplit(text, "Times-Roman", 11, width)
        for k, ln in enumerate(lines):
            justify(c, x, y, ln, width, "Times-Roman", 11, k == len(lines) - 1)
            y -= 14
    c.save()
    return path


@pytest.fixture(scope="module")
def docs(tmp_path_factory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("columns")
    pdf = two_columns(d / "two.pdf")
    one = two_columns(d / "one.pdf", columns=1)
    scan = {"dpi": 200, "angle": 0.6, "seed": 5, "sigma": 12}
    return {"pdf": pdf, "png": noisy_scan(pdf, d / "two.png", **scan), "one": noisy_scan(one, d / "one.png", **scan)}


def _words(text: str) -> list[str]:
    return [w.strip(".,") for w in text.split() if w.strip(".,")]


@pytest.mark.parametrize("kind", ["pdf", "png"])
def test_two_columns_read_column_by_column(docs, kind):
    """The whole left column, then the whole right column; the drop cap is the first letter of its line."""
    page = pdf_page_input(docs[kind], 0) if kind == "pdf" else image_page_input(docs[kind])
    md, _ = page_markdown(page)
    assert "# S\n" not in md and "\nediment" not in md
    body = _words(md.split("The Changing Delta", 1)[1])
    expected = _words(LEFT) + _words(RIGHT)
    assert body[:10] == expected[:10]
    # every word of the left column comes before every word of the right one ("Harbour" opens it)
    assert body.index("Harbour") == len(_words(LEFT))
    same = sum(1 for a, b in zip(body, expected) if a == b)
    assert same >= 0.95 * len(expected)


def test_one_column_page_is_not_cut(docs):
    lines = ocr_lines(Image.open(docs["one"]))
    _, cuts = split_columns(lines)
    assert cuts == []
