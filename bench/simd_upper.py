"""The native pixel code after ISA-L's deflate, with and without its VZEROUPPER at entry (issue 28, item 5).

ISA-L's deflate (each page's PNG) returns with the vector registers' upper halves dirty; legacy SSE code run
after it (the resampler's SSE2 transposes, the gray test's SSSE3) is then slowed until something clears them.
ocrserve's native code clears them at entry (`zeroupper(True)`, the default); this times, in one process and
one thread, each step right after an ISA-L deflate of the page before it, as a render worker runs them, with
the clearing on and off, interleaved page by page. pdfium's render and a pure-Python loop are timed the same
way (they clear the state themselves: not slowed). CPU ms a step, medians over the pages.

    python -m bench.simd_upper --pages 16 --out bench/results/simd-upper-2026-12-06
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from ocrserve import png
from ocrserve.bench.synthetic import make_pdf
from ocrserve.ingest import raster, resize
from ocrserve.ingest.raster import Budget, fit_pixels
from ocrserve.profiles import load_profile


def _cpu_ms(fn, *args) -> float:
    t = time.thread_time()
    fn(*args)
    return (time.thread_time() - t) * 1e3


def _python_loop() -> None:
    x = 0.0
    for i in range(100_000):
        x += i * 0.5


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pages", type=int, default=16)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out", type=Path)
    a = ap.parse_args()
    import isal.isal_zlib as isal_zlib

    assert resize._native is not None and png._native is not None, "the native code is not built"
    budget = Budget.from_profile(load_profile("chandra-2"))
    pdf = make_pdf(Path(tempfile.mkdtemp(prefix="simd-upper-")) / "pages.pdf", a.pages, seed=0)
    doc = raster.open_pdf(str(pdf), None)
    pages = []
    for i in range(a.pages):
        page = doc[i]
        w, h = page.get_size()
        pages.append((page, raster.pdf_scale(w, h, budget)))
    rgb = [p.render(scale=s, rev_byteorder=True, bitmap_maker=raster.bitmap_maker).to_numpy() for p, s in pages]
    encoded = [png.encode_pixels(fit_pixels(x, budget)) for x in rgb]  # warm: the self-check, the tables
    rows = [np.asarray(x).tobytes() for x in rgb]
    steps = {
        "fit (LANCZOS to the 28-px grid)": lambda i: fit_pixels(rgb[i], budget),
        "gray test and copy": lambda i: png.gray_channel(rgb[i]),
        "pdfium render": lambda i: pages[i][0].render(
            scale=pages[i][1], rev_byteorder=True, bitmap_maker=raster.bitmap_maker
        ),
        "python float loop (100k)": lambda i: _python_loop(),
    }
    times: dict[str, dict[str, list[float]]] = {k: {"on": [], "off": []} for k in steps}
    for _ in range(a.rounds):
        for i in range(a.pages):
            prev = rows[i - 1][: 4 << 20]
            for name, step in steps.items():
                for mode in ("off", "on"):
                    for m in (resize._native, png._native):
                        m.zeroupper(mode == "on")
                    isal_zlib.compress(prev, 1)  # the page before's PNG deflate, as in a render worker
                    times[name][mode].append(_cpu_ms(step, i))
    for m in (resize._native, png._native):
        m.zeroupper(True)
    result = {
        "command": "python -m bench.simd_upper " + " ".join(sys.argv[1:]),
        "machine": {"cpu": platform.processor() or platform.machine(), "python": sys.version.split()[0]},
        "pages": a.pages,
        "rounds": a.rounds,
        "png_bytes_mean": int(statistics.mean(len(e) for e in encoded)),
        "median_ms": {
            k: {mode: round(statistics.median(v[mode]), 3) for mode in ("off", "on")} for k, v in times.items()
        },
    }
    lines = ["| step after an ISA-L deflate | VZEROUPPER off | on | off / on |", "|---|---|---|---|"]
    for k, v in result["median_ms"].items():
        lines.append(f"| {k} | {v['off']:.2f} | {v['on']:.2f} | {v['off'] / v['on']:.2f} |")
    print("\n".join(lines))
    if a.out:
        a.out.mkdir(parents=True, exist_ok=True)
        (a.out / "simd-upper.json").write_text(json.dumps(result, indent=2) + "\n")
        (a.out / "simd-upper.md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
