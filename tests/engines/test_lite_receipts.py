"""lite on receipts (#30.6 "receipt rows break apart"): a narrow strip, item names on the left and their prices
right-aligned on the right across a wide gap (or a dotted leader), a total line. Each item's name and its
price come out on one Markdown line (a table row), in the receipt's order; generated here as a born-digital
PDF on an 80 mm strip (its text layer) and as a noisy, turned scan drawn with Pillow."""

from __future__ import annotations

from pathlib import Path

import pytest

from ocrserve.engines.lite.keyvalue import key_value_tables
from ocrserve.ingest.pdf.textlayer import Line
from tests.support.lite import image_page_input, page_markdown, pdf_page_input
from tests.support.receipt import ROWS, SHOP, receipt_pdf, receipt_png


@pytest.fixture(scope="module")
def receipts(tmp_path_factory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("receipts")
    return {"pdf": receipt_pdf(d / "receipt.pdf"), "png": receipt_png(d / "receipt.png")}


@pytest.mark.parametrize("kind", ["pdf", "png"])
def test_receipt_rows_keep_name_and_price_together(receipts, kind):
    page = pdf_page_input(receipts[kind], 0) if kind == "pdf" else image_page_input(receipts[kind])
    md, _ = page_markdown(page)
    lines = md.splitlines()
    at = -1
    for name, price in ROWS:
        row = next((k for k in range(at + 1, len(lines)) if name in lines[k]), None)
        assert row is not None, f"{name!r} not on a line after line {at}:\n{md}"
        line = lines[row]
        assert price in line and line.index(name) < line.index(price), f"{name!r} and {price!r} apart:\n{md}"
        at = row
    assert SHOP[0] in md


def _line(text: str, x0: float, y0: float, x1: float, h: float = 10) -> Line:
    return Line(text, x0, y0, x1, y0 + h)


def test_a_wide_page_or_a_table_row_is_no_key_value_run():
    """Only narrow pages: the same rows on a Letter-wide page stay with the table search; a row of three
    parts (a table's) is not a key and its value."""
    rows = [(f"Item number {k}", f"{k}.50") for k in range(6)]
    narrow = [l for k, (a, b) in enumerate(rows) for l in (_line(a, 10, 14 * k, 80), _line(b, 180, 14 * k, 200))]
    tables, rest = key_value_tables(narrow, 210)
    assert [[c.text for c in r] for r in tables[0].rows] == [list(r) for r in rows] and rest == []
    assert key_value_tables(narrow, 612) == ([], narrow)
    three = narrow + [_line("x", 120, 14 * k, 130) for k in range(6)]
    assert key_value_tables(three, 210)[0] == []


def test_two_labels_over_the_columns_are_the_header():
    rows = [(f"Item number {k}", f"{k}.50") for k in range(4)]
    body = [
        l for k, (a, b) in enumerate(rows) for l in (_line(a, 10, 20 + 14 * k, 80), _line(b, 180, 20 + 14 * k, 200))
    ]
    head = [_line("Item", 10, 4, 30), _line("Price", 175, 4, 200)]
    ((table,), rest) = key_value_tables(head + body, 210)
    assert table.header_rows == 1 and [c.text for c in table.rows[0]] == ["Item", "Price"] and rest == []
    far = [_line("Item", 10, -30, 30), _line("Price", 175, -30, 200)]  # a line apart: not its header
    ((table,), rest) = key_value_tables(far + body, 210)
    assert table.header_rows == 0 and rest == far
