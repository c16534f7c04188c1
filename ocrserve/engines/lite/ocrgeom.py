"""Geometry helpers for RapidOCR's boxes: the page's skew, a font-size proxy per line, the turn that
makes a scan upright (a quarter by the boxes' shape, a half by the text direction classifier)."""

from __future__ import annotations

import logging
import math

from ocrserve.ingest.pdf.textlayer import Line

log = logging.getLogger(__name__)


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


def _reading(lines: list[Line]) -> float:
    return sum(l.score * len(l.text) for l in lines)


def upright_ocr(image, ocr, classify=None) -> tuple[list[Line], int]:
    """OCR an image; when its text stands sideways, OCR it again turned a quarter each way and keep
    the better reading; when its lines read upside down (`upside_down`), OCR it turned by a half and
    keep that if it reads better. Returns the lines (in the turned image's pixels) and the turn: 0,
    90 / 270 (the text ran downwards / upwards: the image was turned counter-clockwise / clockwise)
    or 180. `classify`: crops -> [(label, score)], RapidOCR's text direction classifier by default."""
    lines = ocr(image)
    if not sideways(lines):
        if lines and upside_down(image, lines, classify):
            found = ocr(image.rotate(180))
            if _reading(found) > _reading(lines):
                return found, 180
        return lines, 0
    best, best_turn = lines, 0
    best_score = _reading([l for l in lines if not (l.h > 1.5 * l.w)])
    for turn in (90, 270):
        found = ocr(image.rotate(turn, expand=True))
        score = _reading(found)
        if score > best_score:
            best, best_turn, best_score = found, turn, score
    return best, best_turn


def _rapidocr_classify(crops: list) -> list[tuple[str, float]]:
    """RapidOCR's text line direction classifier (0 or 180 degrees; its model ships in the wheel)."""
    from ocrserve.engines.lite.rapid import _ocr_engine

    return list(_ocr_engine()._load_cls_model()(crops).cls_res)


def upside_down(image, lines: list[Line], classify=None, sample: int = 16) -> bool:
    """Most of the page's widest text lines (up to `sample`) read upside down to the text direction
    classifier: a page scanned upside down (a few milliseconds a page)."""
    import numpy as np

    words = sorted((l for l in lines if l.w >= 2 * l.h and len(l.text) >= 3), key=lambda l: -l.w)[:sample]
    if not words:
        return False
    a = np.asarray(image if image.mode == "RGB" else image.convert("RGB"))
    crops = []
    for l in words:
        pad = 0.15 * l.h
        y0, y1 = max(int(l.y0 - pad), 0), min(int(math.ceil(l.y1 + pad)), a.shape[0])
        x0, x1 = max(int(l.x0 - pad), 0), min(int(math.ceil(l.x1 + pad)), a.shape[1])
        if y1 - y0 >= 4 and x1 - x0 >= 4:
            crops.append(a[y0:y1, x0:x1])
    if not crops:
        return False
    try:
        votes = (classify or _rapidocr_classify)(crops)
    except Exception as exc:  # noqa: BLE001 - no classifier (another rapidocr): the page is read as it is
        log.debug("text direction classifier unavailable: %s", exc)
        return False
    down = sum(1 for label, score in votes if "180" in str(label) and float(score) >= 0.7)
    return down >= 0.6 * len(crops)


_BULLET_MARK = "\u2022"


def mark_bullets(gray, lines: list[Line]) -> int:
    """OCR reads words, not list bullets: a line with a bullet-shaped mark just left of its first word
    (a small, compact, filled blob centred on the line, nothing else there) gets "• " in front, so the
    layout makes it a list item. `gray`: the page as a 2-D uint8 array in the lines' pixel coordinates.
    Returns how many lines were marked."""
    import numpy as np

    marked = 0
    boxes = [(l.x0, l.y0, l.x1, l.y1) for l in lines]
    for ln in lines:
        h = ln.y1 - ln.y0
        if h < 6 or ln.text[:1] in "\u2022\u00b7\u25aa\u25cf\u25e6-*\u2013":
            continue
        x0, x1 = int(ln.x0 - 1.6 * h), int(ln.x0 - 0.1 * h)
        y0, y1 = int(ln.y0), int(math.ceil(ln.y1))
        if x0 < 0 or y0 < 0 or y1 > gray.shape[0] or x1 <= x0:
            continue
        if any(
            b is not None and b[2] > x0 and b[0] < x1 and b[3] > y0 and b[1] < y1
            for b, other in zip(boxes, lines)
            if other is not ln
        ):
            continue  # another line's text is there
        region = gray[y0:y1, x0:x1].astype(np.int16)
        # a 3x3 mean against noise, then dark pixels
        pad = np.pad(region, 1, mode="edge")
        smooth = (
            sum(
                (pad[dy : dy + region.shape[0], dx : dx + region.shape[1]] for dy in range(3) for dx in range(3)),
                np.zeros_like(region),
            )
            / 9
        )
        dark = smooth < 110
        if dark.sum() < 4:
            continue
        rows, cols = np.nonzero(dark)
        by0, by1, bx0, bx1 = rows.min(), rows.max() + 1, cols.min(), cols.max() + 1
        bh, bw = by1 - by0, bx1 - bx0
        fill = dark[by0:by1, bx0:bx1].mean()
        centre = (y0 + (by0 + by1) / 2 - ln.y0) / h
        if (
            0.12 * h <= bh <= 0.6 * h
            and 0.12 * h <= bw <= 0.6 * h
            and 0.5 <= bw / bh <= 2.0
            and fill >= 0.6
            and 0.25 <= centre <= 0.75
        ):
            ln.text = f"{_BULLET_MARK} {ln.text}"
            marked += 1
    return marked
