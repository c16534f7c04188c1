"""Spacing accents drawn over letters, joined to them (NFC)."""

from __future__ import annotations

import unicodedata
from dataclasses import replace

from ocrserve.ingest.pdf.chars import Char

# spacing accents -> combining marks
_COMBINING = {
    "\u00b4": "\u0301",
    "\u02ca": "\u0301",
    "`": "\u0300",
    "\u02cb": "\u0300",
    "\u00a8": "\u0308",
    "\u02c6": "\u0302",
    "^": "\u0302",
    "\u02dc": "\u0303",
    "~": "\u0303",
    "\u02c7": "\u030c",
    "\u02d8": "\u0306",
    "\u02d9": "\u0307",
    "\u02da": "\u030a",
    "\u00af": "\u0304",
    "\u02c9": "\u0304",
    "\u02dd": "\u030b",
    "\u00b8": "\u0327",
    "\u02db": "\u0328",
}


def compose_accents(chars: list[Char]) -> list[Char]:
    """A spacing accent drawn over (or under) a letter joins that letter: "a" + "\u00b4" -> "\u00e1".

    TeX and some word processors draw accented letters as a letter and an accent glyph placed on
    it; the text layer then reads "Min a\u00b4c". The accent's base is the letter of the same row
    (nearby in content order) whose box holds the accent's centre."""
    accents = [i for i, c in enumerate(chars) if c.text in _COMBINING and not c.generated and c.x1 > c.x0]
    if not accents:
        return chars
    drop: set[int] = set()
    out = list(chars)
    for i in accents:
        a = chars[i]
        cx = (a.x0 + a.x1) / 2
        best, best_d = None, None
        for j in range(max(0, i - 40), min(len(chars), i + 41)):
            b = chars[j]
            if j == i or j in drop or b.generated or not b.text.isalpha() or b.text in _COMBINING:
                continue
            if not (b.x0 - 0.5 <= cx <= b.x1 + 0.5):
                continue
            ov = min(a.y1, b.y1) - max(a.y0, b.y0)
            if ov < -0.3 * max(b.y1 - b.y0, 1e-3):
                continue
            d = abs((b.x0 + b.x1) / 2 - cx) + 0.01 * abs(j - i)
            if best_d is None or d < best_d:
                best, best_d = j, d
        if best is None:
            continue
        b = out[best]
        out[best] = replace(
            b, text=unicodedata.normalize("NFC", b.text + _COMBINING[a.text]), y0=min(a.y0, b.y0), y1=max(a.y1, b.y1)
        )
        drop.add(i)
        # the space pdfium may have generated around a detached accent goes with it
        for k in (i - 1, i + 1):
            if 0 <= k < len(chars) and chars[k].generated and chars[k].text == " ":
                drop.add(k)
    return [c for k, c in enumerate(out) if k not in drop]
