"""The page PNG's lossless options, on the pages each profile sends (synthetic born-digital pages, gray):
row filter (none, Up, Sub) x ISA-L deflate level (0-3), CPU ms a page and KiB. Every option decodes to the
same pixels; the cheapest that is also the smallest is what ocrserve/png.py writes (no filter, level 1).

    python bench/results/client-cpu-2026-12-04/encode_options.py > bench/results/client-cpu-2026-12-04/encode_options.txt
"""

import tempfile
import time
from pathlib import Path

import numpy as np

from ocrserve.bench.synthetic import make_pdf
from ocrserve.imagesize import Budget
from ocrserve.ingest.raster import pdf_page_pixels
from ocrserve.png import _deflate
from ocrserve.profiles import PROFILES

pdf = make_pdf(Path(tempfile.mkdtemp()) / "p.pdf", 4)
clock, reps = time.process_time, 5
print(f"deflate: {_deflate.__name__}")
print("| profile | filter | level | filter ms | deflate ms | KiB (4 pages, mean) |")
print("|---|---|---|---|---|---|")
for prof in ("chandra-1", "chandra-2"):
    budget = Budget.from_profile(PROFILES[prof])
    pages = [pdf_page_pixels(str(pdf), i, budget)[0] for i in range(4)]
    assert all(p.ndim == 2 for p in pages)  # gray pages: one channel
    for filt in ("none", "up", "sub"):
        ft, rows = 0.0, []
        for a in pages:
            h, w = a.shape
            raw = np.empty((h, w + 1), np.uint8)
            t = clock()
            for _ in range(reps):
                if filt == "none":
                    raw[:, 0] = 0
                    raw[:, 1:] = a
                elif filt == "up":
                    raw[:, 0] = 2
                    raw[0, 1:] = a[0]
                    np.subtract(a[1:], a[:-1], out=raw[1:, 1:])
                else:
                    raw[:, 0] = 1
                    raw[:, 1] = a[:, 0]
                    np.subtract(a[:, 1:], a[:, :-1], out=raw[:, 2:])
            ft += (clock() - t) / reps
            rows.append(raw)
        for level in (0, 1, 2, 3):
            t, size = clock(), 0
            for _ in range(reps):
                size = sum(len(_deflate.compress(r, level)) for r in rows)
            dt = (clock() - t) / reps
            print(f"| {prof} | {filt} | {level} | {1000 * ft / 4:.2f} | {1000 * dt / 4:.2f} | {size / 4 / 1024:.0f} |")
