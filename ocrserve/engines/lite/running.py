"""Running headers and footers across the pages of one document.

The lite engine sees one page at a time; the lines a document repeats at the top or bottom of its
pages (a journal's running head, "Revision 2.4  P/N 119-036", "Page 3 of 9") are found by reading
the text in the top and bottom bands of a few neighbouring pages (pdfium's bounded text: no layout
work) and keeping the lines that come back on several of them. Texts are compared normalised
(ocrserve.engines.lite.headers.normalise: digits as #, so page numbers and dates still match).
Results are cached per document and page in the worker process.
"""

from __future__ import annotations

import logging
from collections import Counter

from ocrserve.engines.lite.headers import normalise

log = logging.getLogger(__name__)

BAND = 0.16  # share of the page height read at the top and at the bottom
NEIGHBOURS = 4  # other pages compared with (the nearest ones)

_CACHE: dict[tuple, frozenset[str]] = {}


def band_lines(doc, index: int) -> frozenset[str]:
    """Normalised lines in the top and bottom bands of one page (cached per document)."""
    key = (id(doc), index)
    hit = _CACHE.get(key)
    if hit is not None:
        return hit
    out: set[str] = set()
    page = doc[index]
    try:
        tp = page.get_textpage()
        try:
            left, bottom, right, top = page.get_cropbox()
            h = top - bottom
            for b0, b1 in ((top - BAND * h, top), (bottom, bottom + BAND * h)):
                text = tp.get_text_bounded(left=left, bottom=b0, right=right, top=b1) or ""
                for line in text.splitlines():
                    n = normalise(line)
                    if len(n) >= 3:
                        out.add(n)
        finally:
            tp.close()
    except Exception as exc:  # noqa: BLE001 - no context is not an error
        log.debug("no band text for page %s: %s", index + 1, exc)
    finally:
        page.close()
    if len(_CACHE) > 4096:
        _CACHE.clear()
    res = frozenset(out)
    _CACHE[key] = res
    return res


def running_lines(doc, index: int) -> frozenset[str]:
    """Normalised texts that the neighbouring pages of `index` repeat in their top / bottom bands:
    on two or more of them (on the one other page of a two-page document)."""
    n = len(doc)
    if n < 2:
        return frozenset()
    others = sorted((i for i in range(n) if i != index), key=lambda i: (abs(i - index), i))[:NEIGHBOURS]
    counts: Counter[str] = Counter()
    for i in others:
        counts.update(band_lines(doc, i))
    need = 2 if len(others) >= 3 else 1
    return frozenset(t for t, c in counts.items() if c >= need)


def forget(doc) -> None:
    """Drop a closed document's cached bands."""
    for key in [k for k in _CACHE if k[0] == id(doc)]:
        del _CACHE[key]
