"""Micro-benchmark behind two choices in the page-image path (issue 19), CPU only, side by side:

- deflate for page PNGs: zlib level 1 vs ISA-L (isal) level 1, same unfiltered rows;
- the bitmap pdfium renders into: pypdfium2's default (a ctypes buffer) vs pdfium's own (new_foreign, packed);
- the gray test (is R = G = B everywhere?): the strided channel views compared (before) vs
  ocrserve.png._is_gray (each band's bytes against themselves shifted by one).

    python -m bench.png_render_micro --out bench/results/png-render-micro
"""

from __future__ import annotations

import argparse
import functools
import json
import platform
import sys
import tempfile
import time
import zlib
from pathlib import Path

import numpy as np
import pypdfium2 as pdfium

from ocrserve.bench.synthetic import make_pdf
from ocrserve.png import _is_gray

ROOT = Path(__file__).resolve().parents[1]


def _is_gray_strided(a: np.ndarray, rows: int = 128) -> bool:
    """The gray test before: the channel views compared band by band."""
    for y in range(0, a.shape[0], rows):
        band = a[y : y + rows]
        if not (np.array_equal(band[..., 0], band[..., 1]) and np.array_equal(band[..., 1], band[..., 2])):
            return False
    return True


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pages", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--out", type=Path, default=ROOT / "bench/results/png-render-micro")
    a = ap.parse_args()
    from isal import isal_zlib

    pdf = make_pdf(Path(tempfile.mkdtemp()) / "p.pdf", a.pages, seed=0)
    doc = pdfium.PdfDocument(str(pdf))
    makers = {
        "default (ctypes buffer)": {},
        "new_foreign packed": {"bitmap_maker": functools.partial(pdfium.PdfBitmap.new_foreign, force_packed=True)},
    }
    render = dict.fromkeys(makers, 0.0)
    deflate = {"zlib level 1": 0.0, "isal level 1": 0.0}
    size = dict.fromkeys(deflate, 0)
    gray_test = {"strided channel views (before)": 0.0, "shifted bytes (ocrserve.png._is_gray)": 0.0}
    gray_pages = 0
    n = 0
    for _ in range(a.rounds):
        for i in range(a.pages):
            page = doc[i]
            w, _h = page.get_size()
            for k, kw in makers.items():  # interleaved, so machine noise hits both alike
                t = time.process_time()
                px = page.render(
                    scale=1632 / w, rev_byteorder=True, may_draw_forms=True, draw_annots=True, **kw
                ).to_numpy()
                render[k] += time.process_time() - t
            answers = set()
            for k, f in zip(gray_test, (_is_gray_strided, _is_gray)):
                t = time.process_time()
                answers.add(f(px))
                gray_test[k] += time.process_time() - t
            assert len(answers) == 1, "the two gray tests disagree"
            gray_pages += answers.pop()
            gray = px[..., 0] if _is_gray(px) else px
            raw = np.zeros((gray.shape[0], gray.size // gray.shape[0] + 1), np.uint8)
            raw[:, 1:] = gray.reshape(gray.shape[0], -1)
            for k, f in (("zlib level 1", zlib.compress), ("isal level 1", isal_zlib.compress)):
                t = time.process_time()
                c = f(raw, 1)
                deflate[k] += time.process_time() - t
                size[k] += len(c)
            n += 1
    res = {
        "command": "python -m bench.png_render_micro " + " ".join(sys.argv[1:]),
        "started": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "machine": f"{platform.processor() or platform.machine()}, python {platform.python_version()}, "
        f"pypdfium2 {pdfium.PYPDFIUM_INFO}, isal {__import__('isal').__version__}",
        "pages": a.pages,
        "renders_each": n,
        "render_ms": {k: round(v / n * 1000, 2) for k, v in render.items()},
        "deflate_ms": {k: round(v / n * 1000, 2) for k, v in deflate.items()},
        "png_kib": {k: round(v / n / 1024, 1) for k, v in size.items()},
        "gray_test_ms": {k: round(v / n * 1000, 2) for k, v in gray_test.items()},
        "gray_pages": gray_pages,
    }
    a.out.mkdir(parents=True, exist_ok=True)
    (a.out / "result.json").write_text(json.dumps(res, indent=1) + "\n")
    print(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
