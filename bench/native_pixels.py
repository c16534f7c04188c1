"""The native pixel code against the Python it replaces, one page at a time: for each profile, each page's
pdfium render, its gray test and channel copy (ocrserve/_gray.c with and without its vector path, numpy's),
and its LANCZOS fit (ocrserve/ingest/_lanczos.c with and without AVX2, Pillow's), CPU ms a page, with the
outputs compared (a mismatch stops the run).

    python -m bench.native_pixels [--pages 12] [--pdf a.pdf ...] [--out DIR --name NAME]
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any


def _clock(fn, *args) -> tuple[Any, float]:
    t = time.process_time()
    r = fn(*args)
    return r, (time.process_time() - t) * 1000


def run(pdfs: list[Path], pages: int, rounds: int) -> dict[str, Any]:
    import numpy as np
    import PIL
    import pypdfium2 as pdfium

    from ocrserve import png
    from ocrserve.bench.synthetic import make_pdf
    from ocrserve.ingest import raster, resize
    from ocrserve.ingest.raster import Budget, client_fit_size
    from ocrserve.profiles import load_profile

    if not pdfs:
        pdfs = [make_pdf(Path("/tmp") / f"native-pixels-{pages}.pdf", pages)]
    docs = [pdfium.PdfDocument(str(p)) for p in pdfs]
    refs = [(d, i) for d in docs for i in range(len(d))][:pages]
    assert png._native is not None and resize._native is not None, "the native code is not built"
    rule = resize.native_rule()
    report: dict[str, Any] = {
        "python": platform.python_version(),
        "machine": platform.processor() or platform.machine(),
        "Pillow": PIL.__version__,
        "numpy": np.__version__,
        "native_rule": rule,
        "pages": len(refs),
        "rounds": rounds,
    }
    for model in ("chandra-1", "chandra-2"):
        budget = Budget.from_profile(load_profile(model))
        t: dict[str, list[float]] = {}
        for r in range(rounds + 1):  # round 0 warms up
            for d, i in refs:
                page = d[i]
                w, h = page.get_size()
                row: dict[str, float] = {}
                c = time.process_time()
                a = page.render(
                    scale=raster.pdf_scale(w, h, budget),
                    may_draw_forms=True,
                    draw_annots=True,
                    rev_byteorder=True,
                    bitmap_maker=raster.bitmap_maker,
                ).to_numpy()
                row["render"] = (time.process_time() - c) * 1000
                png._native.simd(True)
                g, row["gray native simd"] = _clock(png.gray_channel, a)
                png._native.simd(False)
                g2, row["gray native plain"] = _clock(png.gray_channel, a)
                png._native.simd(True)
                png.use_native = False
                g3, row["gray numpy"] = _clock(png.gray_channel, a)
                png.use_native = True
                assert all((x is None) == (g is None) for x in (g2, g3))
                assert g is None or (np.array_equal(g, g2) and np.array_equal(g, g3))
                src = a if g is None else g
                size = client_fit_size(a.shape[1], a.shape[0], budget)
                if size != (a.shape[1], a.shape[0]):
                    f, row["fit native avx2"] = _clock(resize._native_resize, src, size, rule)
                    resize._native.simd(False)
                    f2, row["fit native plain"] = _clock(resize._native_resize, src, size, rule)
                    resize._native.simd(True)
                    f3, row["fit pillow"] = _clock(resize._pillow, src, size)
                    assert np.array_equal(f, f2) and np.array_equal(f, f3)
                page.close()
                if r:
                    for k, v in row.items():
                        t.setdefault(k, []).append(v)
        report[model] = {k: round(statistics.fmean(v), 2) for k, v in t.items()}
        report[model]["size"] = f"{a.shape[1]}x{a.shape[0]} -> {size[0]}x{size[1]}"
    return report


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pdf", nargs="*", type=Path, default=[])
    ap.add_argument("--pages", type=int, default=12)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--out", type=Path)
    ap.add_argument("--name", default="native-pixels")
    a = ap.parse_args()
    report = run(a.pdf, a.pages, a.rounds)
    report["command"] = "python -m bench.native_pixels " + " ".join(sys.argv[1:])
    text = json.dumps(report, indent=1)
    print(text)
    if a.out:
        a.out.mkdir(parents=True, exist_ok=True)
        (a.out / f"{a.name}.json").write_text(text + "\n")


if __name__ == "__main__":
    main()
