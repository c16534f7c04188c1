"""Geometry helpers for RapidOCR's boxes: the page's skew and a font-size proxy per line."""

from __future__ import annotations

import math

from ocrserve.engines.lite.textlayer import Line


def deskew_angle(quads: list[list[list[float]]]) -> float:
    """Median angle (radians) of the long, flat text boxes."""
    angles = []
    for q in quads:
        (x0, y0), (x1, y1), _, (x3, y3) = q[0], q[1], q[2], q[3]
        w = math.hypot(x1 - x0, y1 - y0)
        h = math.hypot(x3 - x0, y3 - y0)
        if w > 3 * h and w > 0:
            angles.append(math.atan2(y1 - y0, x1 - x0))
    if not angles:
        return 0.0
    angles.sort()
    return angles[len(angles) // 2]


def estimate_sizes(lines: list[Line]) -> None:
    """A font-size proxy for OCR lines: box height (skewed by descenders and padding) averaged with
    the mean character width (which bold, large headings inflate), both relative to the page median."""
    if not lines:
        return
    hs = sorted(l.h for l in lines)
    cws = sorted(l.w / max(len(l.text), 1) for l in lines)
    h_med, cw_med = hs[len(hs) // 2], max(cws[len(cws) // 2], 1e-6)
    for l in lines:
        cw = l.w / max(len(l.text), 1)
        l.size = h_med * (l.h / h_med + cw / cw_med) / 2


def sideways(lines: list[Line]) -> bool:
    """Most text boxes stand upright (tall and narrow): the scan is turned by a quarter."""
    words = [l for l in lines if len(l.text) >= 3]
    tall = sum(1 for l in words if l.h > 1.5 * max(l.w, 1e-6))
    return len(words) >= 3 and tall >= 0.6 * len(words)


def upright_ocr(image, ocr) -> tuple[list[Line], int]:
    """OCR an image; when its text stands sideways, OCR it again turned a quarter each way and keep
    the better reading. Returns the lines (in the turned image's pixels) and the turn: 0, or 90 / 270
    (the text ran downwards / upwards: the image was turned counter-clockwise / clockwise)."""
    lines = ocr(image)
    if not sideways(lines):
        return lines, 0
    best, best_turn = lines, 0
    best_score = sum(l.score * len(l.text) for l in lines if not (l.h > 1.5 * l.w))
    for turn in (90, 270):
        found = ocr(image.rotate(turn, expand=True))
        score = sum(l.score * len(l.text) for l in found)
        if score > best_score:
            best, best_turn, best_score = found, turn, score
    return best, best_turn
