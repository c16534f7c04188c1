"""A numbered list that does not start at 1 (exercises 12-15 of a textbook page) is an ordered list from its
first number: Markdown `12. ...` lines, not bullets carrying an escaped `12\\.`."""

from __future__ import annotations

import json
from pathlib import Path

import ocrserve

EXERCISES = [
    "A ball is thrown upward from the roof of a building with a given speed.",
    "The position of a particle moving along a line is given by the function below.",
    "A rocket is fired vertically upward from the ground with an initial velocity.",
    "Find the velocity and the acceleration of the object at each of the given times.",
]


def exercises_pdf(path: Path, first: int) -> Path:
    from reportlab.pdfgen import canvas

    doc = canvas.Canvas(str(path), pagesize=(612, 792))
    doc.setFont("Helvetica", 11)
    doc.drawString(72, 730, "Use the position functions to answer the following questions.")
    for k, text in enumerate(EXERCISES):
        doc.drawString(72, 700 - 34 * k, f"{first + k}.")
        doc.drawString(96, 700 - 34 * k, text)
    doc.save()
    return path


def test_a_numbered_list_from_12_is_an_ordered_list_from_12(tmp_path):
    pdf = exercises_pdf(tmp_path / "exercises.pdf", 12)
    out = tmp_path / "out"
    (res,) = ocrserve.convert(pdf, output_dir=out, engine="lite")
    assert res.ok, res.error
    md = (out / "exercises" / "exercises.md").read_text()
    for k, text in enumerate(EXERCISES):
        assert f"{12 + k}. {text}" in md, md
    assert "\\." not in md
    blocks = [b for p in json.loads((out / "exercises" / "exercises.json").read_text())["pages"] for b in p["blocks"]]
    assert any(b["label"] == "List-Group" and b["html"].startswith('<ol start="12">') for b in blocks), blocks
