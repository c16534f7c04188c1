"""The steps on a page's boxes before they are joined into lines (ocrserve.engines.lite.layout step 1):
key/value rows of a narrow page (ocrserve.engines.lite.keyvalue), then, for OCR boxes (words or
phrases), the column gutters (ocrserve.engines.lite.columns, ocrserve.engines.lite.column_gaps) and the tables found on word pieces
(ocrserve.engines.lite.grid)."""

from __future__ import annotations

from statistics import median

from ocrserve.engines.lite.column_gaps import ink_gutters, trim
from ocrserve.engines.lite.columns import split_columns
from ocrserve.engines.lite.grid import ocr_tables
from ocrserve.engines.lite.keyvalue import key_value_tables
from ocrserve.engines.lite.tables import TableItem
from ocrserve.ingest.pdf.textlayer import Line


def early_tables(
    lines: list[Line], width: float, ocr: bool, rotated: list[Line]
) -> tuple[list[TableItem], list[Line], list[float], list[Line]]:
    """-> (tables, the other lines, x positions of column gutters, rotated lines not used)."""
    tables, lines = key_value_tables(lines, width)
    gutters: list[float] = []
    if ocr and lines:
        lines, gutters = split_columns(lines)
        lh = median([l.h for l in lines])
        hidden = ink_gutters(lines, lh, gutters)  # gutters the boxes' padding narrows
        trim(lines, hidden)
        gutters += hidden
        found, lines, rotated = ocr_tables(lines, width, lh, rotated)
        tables += found
    return tables, lines, gutters, rotated
