"""Headings as LaTeX sets them (found on the held-out reports of #30): the section number a quad before
its title is one heading with it ("2.1 Overview", not "## 2.1" and "## Overview"); a full line of
running text in a larger font on a page of small print is no heading."""

from __future__ import annotations

from pathlib import Path

from tests.support.helpers import letter_canvas
from tests.support.lite import text_layer_markdown

BODY = [
    "The kernel now offers a way to define commands with optional arguments in any position,",
    "and the new interface checks the arguments when the command is used, not when it is defined.",
    "Older packages keep working, since the previous interface stays as it was for them all.",
]


def _pdf(path: Path) -> Path:
    c = letter_canvas(path)
    y = 720.0
    for number, title, size in (("1", "Introduction", 14), ("2.1", "Overview", 12)):
        c.setFont("Helvetica-Bold", size)
        c.drawString(72, y, number)
        c.drawString(72 + 2.2 * size, y, title)  # a quad and more between number and title
        y -= 24
        c.setFont("Helvetica", 10)
        for ln in BODY:
            c.drawString(72, y, ln)
            y -= 13
        y -= 12
    c.setFont("Helvetica", 13)  # one line set larger, running on with a comma
    c.drawString(72, y, "Most probably, you already have this package installed in your distribution,")
    c.setFont("Helvetica", 10)
    for k, ln in enumerate(BODY * 4):
        c.drawString(72, y - 16 - 13 * k, ln)
    c.save()
    return path


def test_section_number_joins_its_title(tmp_path):
    md = text_layer_markdown(_pdf(tmp_path / "guide.pdf"))[0]
    heads = [l.lstrip("#").strip() for l in md.splitlines() if l.startswith("#")]
    assert heads == ["1 Introduction", "2.1 Overview"], md
