"""Convert the olmOCR-Bench sample with the lite engine and time it.

    python -m bench.lite_olmocr [--pdfs DIR] [--out bench/results] [--workers N]

Writes OUT/lite-olmocr-sample.json and .md (machine, versions, command, seconds per page, how each
page was read: text layer or OCR) and OUT/lite-olmocr-sample/<pdf>_pg<N>_repeat1.md for every page
(olmOCR-Bench layout, sub-folders such as headers_footers/ kept) for `ocrserve eval`.

Per-page seconds are the lite worker's compute time for the page (text layer, OCR, layout); the
wall time covers the whole run (page rendering, the worker pool starting and loading RapidOCR, all
pages `workers` at a time).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import shlex
import statistics
import sys
import time
from pathlib import Path

import pypdfium2 as pdfium

from ocrserve import Document, Source, load_profile, parse_output, render_markdown
from ocrserve.engines.base import PageInput
from ocrserve.engines.lite.engine import LiteEngine

DEFAULT_PDFS = Path(__file__).resolve().parents[2] / "shared" / "data" / "olmocr-bench-sample" / "pdfs"


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    out = {"python": platform.python_version()}
    for pkg in ("ocrserve", "rapidocr", "onnxruntime", "pypdfium2", "numpy", "pillow"):
        try:
            out[pkg] = version(pkg)
        except PackageNotFoundError:
            out[pkg] = "-"
    return out


def page_inputs(pdf: Path, profile) -> list[PageInput]:
    doc = pdfium.PdfDocument(str(pdf))
    pages = []
    for i in range(len(doc)):
        page = doc[i]
        w, h = page.get_size()
        scale = max(profile.pdf_dpi / 72, profile.min_short_side / max(min(w, h), 1.0))
        img = page.render(scale=scale).to_pil().convert("RGB")
        pages.append(
            PageInput(
                doc_id=pdf.stem,
                index=i,
                image=img,
                width=w,
                height=h,
                unit="pt",
                source_path=str(pdf),
                source_type="pdf",
            )
        )
        page.close()
    doc.close()
    return pages


async def run(pdfs: list[Path], root: Path, out_md: Path, workers: int) -> dict:
    profile = load_profile("chandra-1")
    engine = LiteEngine(profile, workers=workers)
    sem = asyncio.Semaphore(engine.capacity())
    rows: list[dict] = []

    async def one(pdf: Path, p: PageInput) -> dict:
        async with sem:
            t0 = time.perf_counter()
            res = await engine.ocr(p)
            wall = time.perf_counter() - t0
        rel = pdf.relative_to(root)
        name = rel.with_suffix("").as_posix()
        row = {
            "pdf": rel.as_posix(),
            "page": p.index + 1,
            "ok": res.ok,
            "error": res.error,
            "verdict": res.extra.get("verdict"),
            "reason": res.extra.get("reason"),
            "compute_s": round(res.extra.get("elapsed_s", wall), 3),
            "wall_s": round(wall, 3),
        }
        parsed = parse_output(res.raw, profile, (p.width, p.height), index=p.index)
        md = render_markdown(Document(source=Source(path=str(pdf), type="pdf", page_count=1), pages=[parsed]))
        target = out_md / f"{name}_pg{p.index + 1}_repeat1.md"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(md, encoding="utf-8")
        row["chars"] = len(md)
        return row

    t0 = time.perf_counter()
    tasks = []
    for pdf in pdfs:
        for p in page_inputs(pdf, profile):
            tasks.append(asyncio.create_task(one(pdf, p)))
    rows = list(await asyncio.gather(*tasks))
    wall = time.perf_counter() - t0
    await engine.aclose()
    return {"rows": rows, "wall_s": wall}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pdfs", type=Path, default=DEFAULT_PDFS)
    ap.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "results")
    ap.add_argument("--workers", type=int, default=min(os.cpu_count() or 1, 8))
    args = ap.parse_args(argv)
    pdfs = sorted(args.pdfs.rglob("*.pdf"))
    if not pdfs:
        print(f"no PDFs under {args.pdfs}", file=sys.stderr)
        return 2
    out_md = args.out / "lite-olmocr-sample"
    load_before = os.getloadavg()
    res = asyncio.run(run(pdfs, args.pdfs, out_md, args.workers))
    rows = res["rows"]
    secs = [r["compute_s"] for r in rows if r["ok"]]
    by = {v: [r["compute_s"] for r in rows if r["verdict"] == v] for v in sorted({str(r["verdict"]) for r in rows})}
    summary = {
        "command": shlex.join(["python", "-m", "bench.lite_olmocr", *(argv or sys.argv[1:])]),
        "machine": {
            "cpu": cpu_model(),
            "cores": os.cpu_count(),
            "platform": platform.platform(),
            "loadavg_before": [round(x, 2) for x in load_before],
            "loadavg_after": [round(x, 2) for x in os.getloadavg()],
        },
        "versions": versions(),
        "workers": args.workers,
        "pdfs": len(pdfs),
        "pages": len(rows),
        "pages_ok": sum(r["ok"] for r in rows),
        "wall_s": round(res["wall_s"], 2),
        "wall_s_per_page": round(res["wall_s"] / max(len(rows), 1), 3),
        "compute_s_per_page_mean": round(statistics.mean(secs), 3) if secs else None,
        "compute_s_per_page_median": round(statistics.median(secs), 3) if secs else None,
        "compute_s_per_page_by_verdict": {
            k: {"pages": len(v), "mean": round(statistics.mean(v), 3)} for k, v in by.items() if v
        },
        "pages_detail": rows,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "lite-olmocr-sample.json").write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    lines = [
        "# lite engine on the olmOCR-Bench sample",
        "",
        f"Command: `{summary['command']}`",
        "",
        f"Machine: {summary['machine']['cpu']}, {summary['machine']['cores']} cores, {summary['machine']['platform']}; "
        f"load average before/after {summary['machine']['loadavg_before']} / {summary['machine']['loadavg_after']} "
        "(the machine is shared: timings under load).",
        "",
        "Versions: " + ", ".join(f"{k} {v}" for k, v in summary["versions"].items()),
        "",
        f"{summary['pdfs']} PDFs, {summary['pages']} pages ({summary['pages_ok']} ok), {args.workers} worker processes: "
        f"wall {summary['wall_s']} s = {summary['wall_s_per_page']} s/page (incl. rendering, pool start, RapidOCR load); "
        f"compute per page mean {summary['compute_s_per_page_mean']} s, median {summary['compute_s_per_page_median']} s.",
        "",
        "| how read | pages | mean s/page |",
        "|---|---|---|",
        *[f"| {k} | {v['pages']} | {v['mean']} |" for k, v in summary["compute_s_per_page_by_verdict"].items()],
        "",
        "| pdf | page | read as | why | compute s | Markdown chars |",
        "|---|---|---|---|---|---|",
        *[
            f"| {r['pdf']} | {r['page']} | {r['verdict']} | {r['reason'] or r['error'] or ''} | {r['compute_s']} | {r.get('chars', 0)} |"
            for r in rows
        ],
        "",
        f"Outputs: `{out_md.name}/<pdf>_pg<N>_repeat1.md` (score with `ocrserve eval`).",
        "",
    ]
    (args.out / "lite-olmocr-sample.md").write_text("\n".join(lines), encoding="utf-8")
    print(f"{len(rows)} pages, wall {summary['wall_s']} s, compute mean {summary['compute_s_per_page_mean']} s/page")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
