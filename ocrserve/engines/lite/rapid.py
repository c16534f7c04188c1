"""RapidOCR in a lite worker process: one instance a process, created on first use (or warmed when the
worker starts), its logging quiet; `ocr_lines` reads an image into lines in its pixel coordinates."""

from __future__ import annotations

import logging
import math
import os
from typing import Any

from PIL import Image

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
    result = _ocr_engine()(np.asarray(img))
    boxes = getattr(result, "boxes", None)
    txts = getattr(result, "txts", None)
    scores = getattr(result, "scores", None)
    if boxes is None or txts is None:
        return []
    quads = [[[float(p[0]), float(p[1])] for p in q] for q in boxes]
    angle = _deskew_angle(quads)
    cx, cy = img.width / 2, img.height / 2
    ca, sa = math.cos(-angle), math.sin(-angle)
    lines = []
    for q, text, score in zip(quads, txts, scores if scores is not None else [1.0] * len(quads)):
        text = (text or "").strip()
        if not text or float(score) < OCR_MIN_SCORE:
            continue
        if abs(angle) > 0.002:
            q = [[cx + (x - cx) * ca - (y - cy) * sa, cy + (x - cx) * sa + (y - cy) * ca] for x, y in q]
        xs, ys = [p[0] for p in q], [p[1] for p in q]
        lines.append(Line(text=text, x0=min(xs), y0=min(ys), x1=max(xs), y1=max(ys), score=float(score)))
    _estimate_sizes(lines)
    gray = img if abs(angle) <= 0.002 else img.rotate(math.degrees(angle), center=(cx, cy), fillcolor="white")
    mark_bullets(np.asarray(gray.convert("L")), lines)
    return lines
