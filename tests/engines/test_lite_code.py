"""lite keeps code in a code block (#30.6): lines of a born-digital PDF set in a monospaced font (Courier,
DejaVu Sans Mono) between paragraphs in a proportional one come out as one fenced block with their
indentation and blank line; a page set wholly in a typewriter font stays text."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.helpers import letter_canvas
from tests.support.lite import text_layer_markdown

CODE = [
    "def load(path):",
    "    rows = []",
    "    for line in open(path):",
    "        if line.strip():",
    "            rows.append(line.split(','))",
    "",
    "    return rows",
]


def _code_pdf(path: Path, font: str) -> Path:
    from reportlab.pdfbase import pdfmetrics
    from reportlab.pdfbase.ttfonts import TTFont

    if font == "DejaVuSansMono":
        pdfmetrics.registerFont(TTFont(font, "/usr/share/fonts/truetype/dejavu/DejaVuSansMono.ttf"))
    c = letter_canvas(path)
    c.drawString(72, 720, "The loader reads each record and keeps the valid ones, as below:")
    c.setFont(font, 10)
    y = 695.0
    for ln in CODE:
        if ln:
            c.drawString(90, y, ln)
        y -= 12
    c.setFont("Helvetica", 11)
    c.drawString(72, y - 14, "Empty lines are skipped, so a trailing newline does no harm.")
    c.save()
    return path


@pytest.mark.parametrize("font", ["Courier", "DejaVuSansMono"])
def test_monospaced_lines_are_a_code_block(tmp_path, font):
    md = text_layer_markdown(_code_pdf(tmp_path / "code.pdf", font))[0]
    assert "```\n" + "\n".join(CODE) + "\n```" in md, md
    assert md.startswith("The loader reads") and "Empty lines are skipped" in md


def test_a_typewritten_page_is_text(tmp_path):
    path = tmp_path / "typed.pdf"
    c = letter_canvas(path, "Courier")
    lines = [
        "Dear Sir, I write to thank you for the kind letter of",
        "the tenth, which reached me yesterday at the farm.",
    ]
    for k, ln in enumerate(lines):
        c.drawString(72, 720 - 14 * k, ln)
    c.save()
    md = text_layer_markdown(path)[0]
    assert "```" not in md and "Dear Sir" in md
