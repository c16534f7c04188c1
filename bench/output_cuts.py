"""Two exact client cuts of issue 28 item 5, each before and after in interleaved rounds (CPU time, medians):

- `html`: the HTML output of 48 pages of the stand-in's answers, every block sanitized again (before) or the
  parser's vouched blocks written as they are (after, render/html_reuse.py); the outputs compared;
- `crops`: the figure crops of 12 synthetic pages, the page PNG decoded whole (before) or inflated down to the
  lowest figure only (after, render/png_rows.py); the files compared.

    python -m bench.output_cuts --rounds 15
"""

from __future__ import annotations

import argparse
import hashlib
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from ocrserve import parse_output, render_html
from ocrserve.bench.synthetic import make_pdf
from ocrserve.ingest.raster import Budget, encode_pixels, pdf_page_pixels
from ocrserve.png import decode_png
from ocrserve.profiles import load_profile
from ocrserve.render import html as html_mod
from ocrserve.render.figures import crop_figures, crop_figures_png
from ocrserve.render.html_reuse import reused_html
from tests.fakes.standin_answers import chandra_output
from tests.support.corpus_util import doc_of


def _median_line(name: str, ms: list[float]) -> str:
    return f"  {name}: median {statistics.median(ms):.3f} ms/page  rounds {' '.join(f'{x:.2f}' for x in ms)}"


def html_cut(rounds: int) -> None:
    pages = [
        parse_output(chandra_output(hashlib.sha256(str(i).encode()).hexdigest(), 1632, 2112), "chandra-1", (612, 792))
        for i in range(48)
    ]
    doc = doc_of(*pages)
    res: dict[str, list[float]] = {"before": [], "after": []}
    outs: dict[str, str] = {}
    try:
        for _ in range(rounds):
            for name, reuse in (("before", False), ("after", True)):
                html_mod.reused_html = reused_html if reuse else (lambda b: None)
                t = time.process_time()
                outs[name] = render_html(doc)
                res[name].append((time.process_time() - t) * 1000 / len(pages))
    finally:
        html_mod.reused_html = reused_html
    print(f"html: {len(pages)} pages, {sum(len(p.blocks) for p in pages)} blocks; render_html CPU ms a page")
    for k, v in res.items():
        print(_median_line(k, v))
    print("  outputs identical:", outs["before"] == outs["after"])


def crops_cut(rounds: int) -> None:
    prof = load_profile("chandra-1")
    work = Path(tempfile.mkdtemp())
    try:
        pdf = make_pdf(work / "d.pdf", 12, seed=0)
        items = []
        for i in range(12):
            px, w, h = pdf_page_pixels(str(pdf), i, Budget.from_profile(prof))
            png = encode_pixels(px)
            items.append((png, chandra_output(hashlib.sha256(png).hexdigest(), px.shape[1], px.shape[0]), w, h))

        def pages():
            return [parse_output(raw, prof, (w, h), index=i) for i, (_, raw, w, h) in enumerate(items)]

        res: dict[str, list[float]] = {"before": [], "after": []}
        for r in range(rounds):
            for name in ("before", "after"):
                todo, out = pages(), work / f"{name}{r}"
                out.mkdir()
                t = time.process_time()
                for (png, *_), page in zip(items, todo, strict=True):
                    if name == "before":
                        crop_figures(page, decode_png(png), out, "d")
                    else:
                        crop_figures_png(page, png, out, "d")
                res[name].append((time.process_time() - t) * 1000 / len(items))

        def files(d: Path) -> dict[str, bytes]:
            return {p.relative_to(d).as_posix(): p.read_bytes() for p in sorted(d.rglob("*")) if p.is_file()}

        same = all(files(work / f"before{r}") == files(work / f"after{r}") != {} for r in range(rounds))
        print(f"crops: {len(items)} synthetic pages, one figure each (stand-in answers); crops CPU ms a page")
        for k, v in res.items():
            print(_median_line(k, v))
        print("  crops byte-identical:", same)
    finally:
        shutil.rmtree(work)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--only", choices=["html", "crops"])
    a = ap.parse_args()
    if a.only != "crops":
        html_cut(a.rounds)
    if a.only != "html":
        crops_cut(a.rounds)


if __name__ == "__main__":
    main()
