"""Page render + encode cost per page, before (render straight to the 32-px grid, crop/pad) and after
(upstream's render, LANCZOS fit; Chandra 2's 28-px grid), interleaved in one process, same pages."""

import importlib.util
import pathlib
import platform
import statistics
import sys
import tempfile
import time

sys.path.insert(0, "/work/main")
from ocrserve.imagesize import Budget
from ocrserve.ingest import raster as new
from ocrserve.profiles import load_profile
from tests.support.pages import PAGES, edge_pdf

spec = importlib.util.spec_from_file_location("old_raster", sys.argv[1])
old = importlib.util.module_from_spec(spec)
sys.modules["old_raster"] = old
spec.loader.exec_module(old)
d = pathlib.Path(tempfile.mkdtemp())
pdfs = [edge_pdf(d / f"{k}.pdf", PAGES[k]) for k in ("letter", "a4", "legal", "slide")]
res = {}
for prof in ("chandra-1", "chandra-2"):
    p = load_profile(prof)
    nb = Budget.from_profile(p)
    ob = old.Budget(p.pdf_dpi, p.min_short_side, p.min_image_side, p.max_pixels, p.patch_multiple)
    t = {"before": [], "after": []}
    for _rep in range(12):
        for f in pdfs:
            for name, mod, b in (("before", old, ob), ("after", new, nb)):
                t0 = time.perf_counter()
                mod.render_pdf_page(str(f), 0, b, None)
                t[name].append(time.perf_counter() - t0)
    res[prof] = {k: statistics.median(v) * 1000 for k, v in t.items()}
print(f"python {platform.python_version()} on {platform.machine()}, {len(pdfs)} page sizes x 12 rounds, interleaved")
for prof, r in res.items():
    print(
        f"{prof}: before {r['before']:.1f} ms/page, after {r['after']:.1f} ms/page, after/before {r['after'] / r['before']:.2f}"
    )
