"""The client's work for one page, split finer than `client_cpu_stages`: what the page costs before any
pipeline overhead (pool, event loop, HTTP), one page at a time in this process, each step timed with the
process's CPU clock, for each profile.

Steps, in the order the pipeline runs them (ocrserve/ingest/raster.py, ocrserve/png.py, the openai engine,
ocrserve/pipeline/page.py):
  load (the page from its open document), flatten (forms and annotations; a page without any is not
  loaded again), render (pdfium, into the white bitmap), fit (upstream's LANCZOS to the profile's grid, or
  nothing), gray (the R = G = B test; a gray page's channel copied into its PNG rows with it), rows (the
  PNG rows of a colour page, and each row's filter byte),
  deflate (ISA-L level 1, or zlib), base64 (the request body's image), parse (a raw answer -> the Page:
  blocks, Markdown, HTML), pickle (the Page back from a render worker and its answer sent there).

`--answers FILE` (a JSON list of raw model answers) gives the parse step realistic answers, one a page in
turn; without it, the stand-in server's answer for each page (tests/fakes/standin_answers.py, ~1.3 KB).

    python -m bench.client_floor --pages 40 [--pdf a.pdf ...] [--answers answers.json] --out DIR --name NAME

`--native both` runs every page twice in turn: with ocrserve's native code (the LANCZOS resampler,
ocrserve/ingest/resize.py, and the one-pass gray test, ocrserve/_gray.c) and without it (Pillow's resize,
numpy's gray test and copy): the same pixels and bytes; each profile's rows then "native" and "python".
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import pickle
import platform
import shlex
import statistics
import sys
import time
from pathlib import Path
from typing import Any

STEPS = ("load", "flatten", "render", "fit", "gray", "rows", "deflate", "base64", "parse", "pickle")


def _pages(pdfs: list[Path], limit: int) -> list[tuple[Path, int]]:
    import pypdfium2 as pdfium

    out: list[tuple[Path, int]] = []
    for p in pdfs:
        n = len(pdfium.PdfDocument(str(p)))
        out += [(p, i) for i in range(n)]
    return out[:limit]


def one_page(doc, index: int, budget, answer: str | None, profile) -> tuple[dict[str, float], dict[str, Any]]:
    """CPU seconds of each step for one page, and what the page was (size, gray, PNG bytes)."""
    import numpy as np

    from ocrserve.ingest import raster
    from ocrserve.pipeline.page import finish_page
    from ocrserve.png import _deflate, _gray_plane
    from tests.fakes.standin_answers import chandra_output

    t: dict[str, float] = {}
    clock = time.process_time

    c0 = clock()
    page = doc[index]
    c1 = clock()
    w, h = page.get_size()
    changed = raster._flatten(page)
    if changed:
        page.close()
        page = doc[index]
    c2 = clock()
    bitmap = page.render(
        scale=raster.pdf_scale(w, h, budget),
        may_draw_forms=True,
        draw_annots=True,
        rev_byteorder=True,
        bitmap_maker=raster.bitmap_maker,
    )
    a = bitmap.to_numpy()
    c3 = clock()
    a = raster.fit_pixels(a, budget)
    c4 = clock()
    hh, ww = a.shape[:2]
    raw = _gray_plane(a, ww + 1, 1) if a.ndim == 3 else None  # a gray page's channel into its PNG rows
    gray = raw is not None
    c5 = clock()
    if raw is None:
        raw = np.empty((hh, ww * (1 if a.ndim == 2 else 3) + 1), dtype=np.uint8)
        raw[:, 1:] = a.reshape(hh, -1)
    raw[:, 0] = 0
    c6 = clock()
    z = _deflate.compress(raw, 1)
    c7 = clock()
    base64.b64encode(z)
    c8 = clock()
    text = answer if answer is not None else chandra_output(hashlib.sha256(z).hexdigest(), ww, hh)
    parsed = finish_page(
        text, profile, index=index, width=w, height=h, unit="pt", image_size=(ww, hh), png=None, staging=None, prefix=""
    )
    c9 = clock()
    pickle.loads(pickle.dumps(parsed, protocol=5))
    pickle.loads(pickle.dumps(text, protocol=5))
    c10 = clock()
    page.close()
    marks = (c0, c1, c2, c3, c4, c5, c6, c7, c8, c9, c10)
    for i, step in enumerate(STEPS):
        t[step] = marks[i + 1] - marks[i]
    info = {"size": [ww, hh], "gray": bool(gray or a.ndim == 2), "png_bytes": len(z), "answer_chars": len(text)}
    return t, info


def run(
    pdfs: list[Path], n: int, answers: list[str] | None, models: list[str], rounds: int, variants: list[str]
) -> dict[str, Any]:
    """Each model's pages, with each variant in turn on every page (interleaved: the same page, moments apart)."""
    import pypdfium2 as pdfium

    from ocrserve import png
    from ocrserve.ingest import resize
    from ocrserve.ingest.raster import Budget
    from ocrserve.profiles import load_profile

    pages = _pages(pdfs, n)
    docs = {p: pdfium.PdfDocument(str(p)) for p in {p for p, _ in pages}}
    report: dict[str, Any] = {}
    for model in models:
        profile = load_profile(model)
        budget = Budget.from_profile(profile)
        pers: dict[str, dict[str, list[float]]] = {z: {s: [] for s in STEPS} for z in variants}
        infos = []
        for r in range(rounds + 1):  # round 0 warms up (imports, pdfium's font cache), not counted
            for k, (p, i) in enumerate(pages):
                ans = answers[k % len(answers)] if answers else None
                for z in variants:
                    resize.use_native = png.use_native = z == "native"
                    t, info = one_page(docs[p], i, budget, ans, profile)
                    if r:
                        for s in STEPS:
                            pers[z][s].append(t[s] * 1000)
                        if z == variants[0]:
                            infos.append(info)
        resize.use_native = png.use_native = True
        for z, per in pers.items():
            key = model if len(variants) == 1 else f"{model} {z}"
            report[key] = {"code": z, **_summary(per, pages, rounds, infos)}
    return report


def _summary(per: dict[str, list[float]], pages: list, rounds: int, infos: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "mean_ms": {s: round(statistics.fmean(v), 3) for s, v in per.items()},
        "median_ms": {s: round(statistics.median(v), 3) for s, v in per.items()},
        "total_mean_ms": round(sum(statistics.fmean(v) for v in per.values()), 3),
        "pages": len(pages),
        "rounds": rounds,
        "gray_pages": sum(i["gray"] for i in infos) // max(1, rounds),
        "mean_png_kib": round(statistics.fmean(i["png_bytes"] for i in infos) / 1024, 1),
        "mean_answer_chars": round(statistics.fmean(i["answer_chars"] for i in infos)),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pdf", nargs="*", type=Path, default=[], help="PDFs (default: synthetic born-digital pages)")
    ap.add_argument("--pages", type=int, default=40)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--answers", type=Path, help="a JSON list of raw model answers for the parse step")
    ap.add_argument("--models", default="chandra-1,chandra-2")
    ap.add_argument(
        "--native",
        choices=("native", "python", "both"),
        default="native",
        help="ocrserve's native resampler and gray test, Pillow's resize and numpy's test, or both in turn",
    )
    ap.add_argument("--out", type=Path)
    ap.add_argument("--name", default="client-floor")
    a = ap.parse_args()
    pdfs = list(a.pdf)
    if not pdfs:
        import tempfile

        from ocrserve.bench.synthetic import make_pdf

        pdfs = [make_pdf(Path(tempfile.mkdtemp()) / "synthetic.pdf", a.pages, seed=0)]
    answers = json.loads(a.answers.read_text()) if a.answers else None
    report = {
        "command": "python -m bench.client_floor " + shlex.join(sys.argv[1:]),
        "started": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
        "machine": platform.processor() or platform.machine(),
        "cpu": _cpu_name(),
        "python": platform.python_version(),
        "versions": _versions(),
        "pdfs": [str(p) for p in pdfs],
        "answers": str(a.answers) if a.answers else "the stand-in's",
        "profiles": run(
            pdfs,
            a.pages,
            answers,
            a.models.split(","),
            a.rounds,
            ["python", "native"] if a.native == "both" else [a.native],
        ),
    }
    text = json.dumps(report, indent=1)
    print(text)
    if a.out:
        a.out.mkdir(parents=True, exist_ok=True)
        (a.out / f"{a.name}.json").write_text(text + "\n")
        (a.out / f"{a.name}.md").write_text(_table(report))


def _cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def _versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for pkg in ("pypdfium2", "Pillow", "numpy", "isal", "selectolax", "pydantic"):
        try:
            out[pkg] = version(pkg)
        except PackageNotFoundError:
            out[pkg] = "missing"
    return out


def _table(report: dict[str, Any]) -> str:
    head = "| profile | " + " | ".join(STEPS) + " | total | PNG KiB | answer chars |\n"
    head += "|---" * (len(STEPS) + 4) + "|\n"
    rows = ""
    for model, r in report["profiles"].items():
        cells = " | ".join(f"{r['mean_ms'][s]:.2f}" for s in STEPS)
        rows += f"| {model} | {cells} | {r['total_mean_ms']:.2f} | {r['mean_png_kib']} | {r['mean_answer_chars']} |\n"
    return (
        f"# {report['command']}\n\n{report['started']}, {report['cpu']}, Python {report['python']}, "
        f"{report['versions']}\n\nMean CPU ms a page ({report['answers']} answers):\n\n{head}{rows}"
    )


if __name__ == "__main__":
    main()
