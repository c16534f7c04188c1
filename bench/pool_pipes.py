"""The render pool's transport alone, its pipes at the OS's 64 KB against widened (issue 28, item 5).

A page's trips through `ocrserve.ingest.pool.ResilientPool` as a conversion makes them: its PNG back from the
render worker (the result), then to a worker again with the model's answer for the figure crops (the task).
Each task here carries a real page PNG of the synthetic corpus (one per page, 400 KB born-digital) and does
no work of its own, so what is timed is the transport: CPU ms a page of the parent (all its threads: the
event loop, the executor's manager and feeder threads) and of the workers, narrow and wide interleaved
round by round, medians. Nothing is compared by eye: each round checks every page came back whole.

    python -m bench.pool_pipes --pages 192 --rounds 5 --out bench/results/pool-pipes-2026-12-06/devvm
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

import psutil

from ocrserve.bench.synthetic import make_pdf
from ocrserve.ingest import pool as pool_mod
from ocrserve.ingest import raster
from ocrserve.ingest.raster import Budget
from ocrserve.profiles import load_profile
from ocrserve.settings import get_settings


def _back(png: bytes, n: int) -> bytes:
    """The worker's side of the render trip: the page's PNG as its result."""
    return png if n < 0 else png[:n]


def _crops(png: bytes, raw: str) -> int:
    """The worker's side of the finish trip: the PNG and the answer in, a small result out."""
    return len(png) + len(raw)


async def _round(pngs: list[bytes], wide: bool, workers: int, in_flight: int) -> dict[str, float]:
    saved = pool_mod.PIPE_BYTES
    pool_mod.PIPE_BYTES = saved if wide else 0
    pool = pool_mod.ResilientPool(workers)
    try:
        ex = pool._ensure()
        await asyncio.gather(*(pool.run(_back, b"", 0) for _ in range(4 * workers)))  # workers started
        procs = [psutil.Process(p.pid) for p in pool_mod.worker_processes(ex)]
        me = psutil.Process()

        def cpu(ps: list[psutil.Process]) -> float:
            return sum(sum(p.cpu_times()[:2]) for p in ps)

        p0, w0, t0 = cpu([me]), cpu(procs), time.perf_counter()
        sem = asyncio.Semaphore(in_flight)

        async def page(png: bytes) -> None:
            async with sem:
                got = await pool.run(_back, png, -1)
                assert got == png, "a page came back changed"
                assert await pool.run(_crops, got, "<div></div>") == len(png) + 11

        await asyncio.gather(*(page(p) for p in pngs))
        n = len(pngs)
        return {
            "parent_ms": 1000 * (cpu([me]) - p0) / n,
            "workers_ms": 1000 * (cpu(procs) - w0) / n,
            "wall_s": time.perf_counter() - t0,
        }
    finally:
        pool.shutdown()
        pool_mod.PIPE_BYTES = saved


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pages", type=int, default=192)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--in-flight", type=int, default=16)
    ap.add_argument("--model", default="chandra-2")
    ap.add_argument("--out", type=Path)
    a = ap.parse_args()
    budget = Budget.from_profile(load_profile(a.model))
    pdf = make_pdf(Path(tempfile.mkdtemp(prefix="pool-pipes-")) / "pages.pdf", a.pages, seed=0)
    mip = get_settings().max_image_pixels
    info = raster.open_source(str(pdf), None, mip)
    pngs = [raster.render_page(str(pdf), info.type, i, budget, None, mip).png for i in range(a.pages)]
    runs: dict[str, list[dict[str, float]]] = {"narrow": [], "wide": []}
    for _ in range(a.rounds):
        for name in ("narrow", "wide"):
            runs[name].append(asyncio.run(_round(pngs, name == "wide", a.workers, a.in_flight)))
    med = {k: {f: round(statistics.median(r[f] for r in v), 3) for f in v[0]} for k, v in runs.items()}
    result = {
        "command": "python -m bench.pool_pipes " + " ".join(sys.argv[1:]),
        "machine": {"cpu": platform.processor() or platform.machine(), "python": sys.version.split()[0]},
        "pipe_bytes_wide": pool_mod.PIPE_BYTES,
        "pipe_max": Path("/proc/sys/fs/pipe-max-size").read_text().strip(),
        "png_bytes_mean": int(statistics.mean(len(p) for p in pngs)),
        "runs": runs,
        "median": med,
    }
    lines = ["| pipes | parent ms/page | workers ms/page | both |", "|---|---|---|---|"]
    for k, v in med.items():
        lines.append(f"| {k} | {v['parent_ms']:.2f} | {v['workers_ms']:.2f} | {v['parent_ms'] + v['workers_ms']:.2f} |")
    print("\n".join(lines))
    if a.out:
        a.out.mkdir(parents=True, exist_ok=True)
        (a.out / "pool-pipes.json").write_text(json.dumps(result, indent=2) + "\n")
        (a.out / "pool-pipes.md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
