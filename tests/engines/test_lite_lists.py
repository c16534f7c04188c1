"""Lists and numbered headings (issue 30.5) on a generated three-page handbook: bullets set at twice the
text's size at their own tab stop (a word processor's hanging indent), numbered and lettered items,
numbered section headings in bold (and one in the body's font) right above their paragraphs."""

from __future__ import annotations

import random
import re
from pathlib import Path

import pytest
from reportlab.pdfbase import pdfmetrics
from reportlab.pdfbase.ttfonts import TTFont

from ocrserve.engines.lite.marks import join_markers, section_heading, section_level
from ocrserve.ingest.pdf.textlayer import Line
from tests.support.helpers import letter_canvas
from tests.support.lite import pdf_markdown

FONT = Path("/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf")
WORDS = (
    "the model training data set results method value system process analysis performance network layer "
    "input output parameter learning rate batch size validation test error function weight loss schedule"
).split()
HEADS = [
    ["Hyper Parameter Optimization", "Model Selection Criteria", "Results"],
    ["Data Augmentation", "Training Schedule", "Evaluation Metrics"],
    ["Error Analysis", "Deployment Notes", "Future Work"],
]


def build_handbook(path: Path, text_dx: float) -> dict[str, list[str]]:
    """Three pages; `text_dx`: from a bullet to its text (the tab stop). Returns the headings and items."""
    pdfmetrics.registerFont(TTFont("DejaVuLists", str(FONT)))
    rng = random.Random(5)
    want: dict[str, list[str]] = {"headings": [], "items": [], "plain": []}

    def sentence(n: int) -> str:
        return " ".join(rng.choice(WORDS) for _ in range(n)).capitalize() + "."

    c = letter_canvas(path)
    for pg in range(3):
        y = 740.0

        def para(n: int) -> None:
            nonlocal y
            c.setFont("Helvetica", 10)
            for _ in range(n):
                c.drawString(72, y, (sentence(8) + " " + sentence(8))[:95])
                y -= 13
            y -= 8

        def heading(text: str, bold: bool = True) -> None:
            nonlocal y
            c.setFont("Helvetica-Bold" if bold else "Helvetica", 12 if bold else 10)
            c.drawString(72, y, text)
            y -= 15  # the paragraph right below, no extra space
            want["headings" if bold else "plain"].append(text)

        def items(marker: str, n: int) -> None:
            nonlocal y
            for k in range(n):
                text = sentence(5)
                if "{" in marker:  # numbered / lettered, in the text's font
                    c.setFont("Helvetica", 10)
                    c.drawString(80, y, marker.format(k + 1, "abc"[k]))
                else:  # a bullet glyph at twice the text's size
                    c.setFont("DejaVuLists", 20)
                    c.drawString(80, y, marker)
                c.setFont("Helvetica", 10)
                c.drawString(80 + text_dx, y, text)
                want["items"].append(text)
                y -= 17
            y -= 8

        sec = pg + 4
        heading(f"{sec}.1 {HEADS[pg][0]}")
        para(4)
        items("\u2022", 3)
        heading(f"{sec}.2 {HEADS[pg][1]}")
        para(3)
        items(["\u25e6", "\u25aa", "\u2013"][pg], 3)
        para(2)
        items("{0}." if pg != 1 else "{1})", 3)
        heading(f"{sec}.3 {HEADS[pg][2]}", bold=pg != 2)
        para(3)
        c.setFont("Helvetica", 9)
        c.drawString(300, 40, str(pg + 1))
        c.showPage()
    c.save()
    return want


@pytest.mark.skipif(not FONT.is_file(), reason="DejaVu Sans (fonts-dejavu-core) is not installed")
@pytest.mark.parametrize("text_dx", [14, 30, 40])
def test_large_bullets_make_list_items_and_numbered_headings_stand_alone(tmp_path, text_dx):
    path = tmp_path / "handbook.pdf"
    want = build_handbook(path, text_dx)
    md = "\n\n".join(pdf_markdown(path, page) for page in range(3))
    lines = md.splitlines()
    heads = [ln for ln in lines if ln.startswith("#")]
    assert not [h for h in heads if not re.search(r"[A-Za-z]{3}", h)], heads  # no "### •"
    for h in want["headings"] + want["plain"]:
        assert f"## {h}" in lines, (h, heads)  # its own line, level from its numbering
    # (lettered items stay in a bullet list with their letters: "- a) ...")
    items = [re.sub(r"^(?:- |\d+\. )(?:[a-c]\) )?", "", ln) for ln in lines if re.match(r"(- |\d+\. )", ln)]
    assert all(it in items for it in want["items"]), (want["items"], md)
    assert sum(ln.startswith("- ") for ln in lines) >= 15 and "1. " in md


def test_marker_fragments_join_their_text():
    lines = [
        Line("\u2022", 80, 95, 87, 118, 20.0),  # a large bullet, its box taller than the text's
        Line("First item text", 110, 100, 200, 112, 10.0),
        Line("-", 300, 100, 304, 112, 10.0),  # a dash before a number: a table's empty cell, left alone
        Line("12.5", 320, 100, 340, 112, 10.0),
    ]
    out = join_markers(lines)
    assert [l.text for l in out] == ["\u2022 First item text", "-", "12.5"]
    assert out[0].size == 10.0 and (out[0].y0, out[0].y1) == (100, 112)
    assert section_heading("5.1 Hyper Parameter Optimization") and section_level("5.1.2 Setup") == 3
    assert not section_heading("5.1 Hyper parameters were tuned.") and not section_heading("2.3 Results .... 17")
