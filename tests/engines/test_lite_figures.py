"""lite keeps the text of a figure in the figure block (#30.4), on documents generated here: a bar chart
drawn with vector graphics (tick labels, bar labels, an axis name) between two paragraphs, born-digital
and as a noisy scan; a list of short items and a text of short lines stay text."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pypdfium2 as pdfium
import pytest
from PIL import Image

from ocrserve import load_profile, parse_output
from ocrserve.engines.lite.engine import lite_raw_for
from tests.support.helpers import letter_canvas
from tests.support.lite import image_page_input, pdf_page_input

PROFILE = load_profile("chandra-1")
BODY = [
    "Sediment moves through the delta in pulses that follow the seasonal floods of the",
    "river. Engineers measure the depth of each channel and the speed of the water at",
    "fixed stations. The survey team repeated the soundings every spring and compared",
    "them with older maps. Most of the silt settles near the mouth where the current",
    "slows down and spreads out over the wide shallow flats near the coast.",
]
BARS = [("DA1", 120), ("DA2", 150), ("DB1", 90), ("DB2", 170), ("DC", 60)]
ITEMS = ["Apples", "Pears", "Plums", "Cherries", "Quinces", "Medlars", "Damsons", "Figs"]


def chart_pdf(path: Path) -> Path:
    c = letter_canvas(path)

    def body(y: float) -> None:
        c.setFont("Helvetica", 11)
        for ln in BODY:
            c.drawString(72, y, ln)
            y -= 15

    body(720)
    x0, y0, x1, y1 = 110, 420, 480, 620
    c.line(x0, y0, x1, y0)
    c.line(x0, y0, x0, y1)
    c.setFont("Helvetica", 9)
    for k in range(10):
        c.line(x0 - 4, y0 + k * 20, x0, y0 + k * 20)
        c.drawRightString(x0 - 6, y0 + k * 20 - 3, str(10 * k))
    for k, (label, h) in enumerate(BARS):
        c.rect(x0 + 20 + k * 70, y0, 40, h, fill=1)
        c.drawCentredString(x0 + 40 + k * 70, y0 - 12, label)
    c.setFont("Helvetica", 10)
    c.drawCentredString((x0 + x1) / 2, y0 - 30, "Station")
    c.setFont("Helvetica-Oblique", 10)
    c.drawString(72, 370, "Figure 1: Silt load by station (tonnes per day).")
    body(340)
    c.save()
    return path


def list_pdf(path: Path) -> Path:
    c = letter_canvas(path)
    c.drawString(72, 720, "The orchard grows these fruits, each in its own row of trees:")
    for k, item in enumerate(ITEMS):
        c.drawString(90, 700 - 15 * k, item)
    c.drawString(72, 560, "Every row is pruned in the winter and picked by hand in the autumn.")
    c.save()
    return path


@pytest.fixture(scope="module")
def docs(tmp_path_factory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("figures")
    pdf = chart_pdf(d / "chart.pdf")
    doc = pdfium.PdfDocument(str(pdf))
    img = doc[0].render(scale=200 / 72).to_pil().convert("L")
    doc.close()
    a = np.asarray(img).astype(np.float32) + np.random.default_rng(5).normal(0, 10, (img.height, img.width))
    Image.fromarray(np.clip(a, 0, 255).astype(np.uint8)).convert("RGB").save(d / "chart.png")
    return {"pdf": pdf, "png": d / "chart.png", "list": list_pdf(d / "list.pdf")}


def _blocks(page) -> list:
    raw = lite_raw_for(page, PROFILE)
    return parse_output(raw, PROFILE, (page.width, page.height), index=0, unit=page.unit).blocks


@pytest.mark.parametrize("kind", ["pdf", "png"])
def test_chart_labels_stay_in_the_figure(docs, kind):
    page = pdf_page_input(docs[kind], 0) if kind == "pdf" else image_page_input(docs[kind])
    blocks = _blocks(page)
    labels = [(b.label, b.text[:40]) for b in blocks]
    assert not [b for b in blocks if b.label == "Section-Header"], labels  # no "## 20", "## DC"
    figures = [b for b in blocks if b.label == "Image"]
    assert len(figures) == 1, labels
    assert all(name in figures[0].html for name, _ in BARS) and "Station" in figures[0].html
    text = [b for b in blocks if b.label == "Text"]
    assert [b.text.split()[0] for b in text] == ["Sediment", "Figure", "Sediment"], labels
    assert not any(name in b.text for b in text for name, _ in BARS)


def test_a_list_of_short_items_stays_text(docs):
    blocks = _blocks(pdf_page_input(docs["list"], 0))
    assert not [b for b in blocks if b.label == "Image"]
    text = " ".join(b.text for b in blocks)
    assert all(item in text for item in ITEMS)
