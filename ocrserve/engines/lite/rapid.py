"""RapidOCR in a lite worker process: one instance a process, created on first use (or warmed when the
worker starts), its logging quiet; `ocr_lines` reads an image into lines in its pixel coordinates."""

from __future__ import annotations

import logging
import math
import os
from typing import Any

from PIL import Image

from ocrserve.engines.lite.grid import OcrLine, scaled
from ocrserve.engines.lite.ocrgeom import deskew_angle as _deskew_angle
from ocrserve.engines.lite.ocrgeom import estimate_sizes as _estimate_sizes
from ocrserve.engines.lite.ocrgeom import mark_bullets
from ocrserve.ingest.pdf.textlayer import Line

log = logging.getLogger(__name__)

OCR_MIN_SCORE = 0.5  # RapidOCR lines below this confidence are dropped
_OCR: Any = None


def _quiet_rapidocr() -> None:
    for name in ("RapidOCR", "rapidocr"):
        logging.getLogger(name).setLevel(logging.ERROR)


_THREADS = 0  # RapidOCR's threads in this worker process (set by _worker_init)


def _worker_init(threads: int, warm: bool = True) -> None:
    os.environ.setdefault("OMP_NUM_THREADS", str(threads))
    global _THREADS
    _THREADS = threads
    _quiet_rapidocr()
    if warm:
        try:
            _ocr_engine()  # one RapidOCR per process, loaded before the first page
        except Exception as exc:  # noqa: BLE001 - reported again on the first page that needs OCR
            log.warning("RapidOCR could not be loaded: %s", exc)


def _ocr_engine():
    global _OCR
    if _OCR is None:
        _quiet_rapidocr()
        from rapidocr import RapidOCR

        threads = _THREADS or -1
        _OCR = RapidOCR(
            params={
                "Global.log_level": "error",
                "Global.use_cls": False,
                "EngineConfig.onnxruntime.intra_op_num_threads": threads,
                "EngineConfig.onnxruntime.inter_op_num_threads": 1,
            }
        )
        _quiet_rapidocr()
    return _OCR


def ocr_lines(image: Image.Image) -> list[Line]:
    """RapidOCR on an image -> lines in the image's pixel coordinates (deskewed by the median angle)."""
    import numpy as np

    img = image if image.mode == "RGB" else image.convert("RGB")
    img, f = _fit(img)
    result = _ocr_engine()(np.asarray(img), return_word_box=True)
    boxes = getattr(result, "boxes", None)
    txts = getattr(result, "txts", None)
    scores = getattr(result, "scores", None)
    if boxes is None or txts is None:
        return []
    word_results = getattr(result, "word_results", None) or [()] * len(txts)
    quads = [[[float(p[0]), float(p[1])] for p in q] for q in boxes]
    angle = _deskew_angle(quads)
    cx, cy = img.width / 2, img.height / 2
    ca, sa = math.cos(-angle), math.sin(-angle)

    def turn(q: list) -> list[list[float]]:
        if abs(angle) <= 0.002:
            return [[float(x), float(y)] for x, y in q]
        return [[cx + (x - cx) * ca - (y - cy) * sa, cy + (x - cx) * sa + (y - cy) * ca] for x, y in q]

    lines: list[Line] = []
    for q, text, score, wr in zip(quads, txts, scores if scores is not None else [1.0] * len(quads), word_results):
        text = (text or "").strip()
        if not text or float(score) < OCR_MIN_SCORE:
            continue
        xs, ys = [p[0] for p in turn(q)], [p[1] for p in turn(q)]
        words = []
        for w in wr or ():  # (text, score, quad): the words' boxes, for tables (ocrserve.engines.lite.grid)
            wx = [p[0] for p in turn(w[2])]
            words.append((str(w[0]), min(wx), max(wx)))
        words.sort(key=lambda w: w[1])
        lines.append(
            OcrLine(text=text, x0=min(xs), y0=min(ys), x1=max(xs), y1=max(ys), score=float(score), words=tuple(words))
        )
    gray = img if abs(angle) <= 0.002 else img.rotate(math.degrees(angle), center=(cx, cy), fillcolor="white")
    if f != 1.0:  # back to the image's own pixels
        mark_bullets(np.asarray(gray.convert("L")), lines)
        lines = [scaled(l, 1 / f, 0, 0) for l in lines]
        _estimate_sizes(lines)
        return lines
    _estimate_sizes(lines)
    mark_bullets(np.asarray(gray.convert("L")), lines)
    return lines


DET_SHORT_SIDE = 736  # RapidOCR's detector scales an image up until its short side is this long


def _fit(img: Image.Image) -> tuple[Image.Image, float]:
    """A small image (a table crop of 45x250 px) scaled up at most twice and padded with white to the
    detector's short side, instead of being scaled up 16 times by the detector (seconds, not a tenth)."""
    short = min(img.width, img.height)
    if short >= DET_SHORT_SIDE / 2 or short < 1:
        return img, 1.0
    f = 2.0
    big = img.resize((round(img.width * f), round(img.height * f)), Image.Resampling.BICUBIC)
    canvas = Image.new("RGB", (max(big.width, DET_SHORT_SIDE), max(big.height, DET_SHORT_SIDE)), "white")
    canvas.paste(big, (0, 0))
    return canvas, f
