"""Where the pipeline's client CPU per page goes: the parent process (event loop, engine, HTTP, pool
transport, document assembly, output writing) against the render workers (rendering, parsing, figure crops,
their side of the pool's transport), with the workers' own timed steps (render_s, parse_s) taken out.

    python -m bench.pipeline_split --model chandra-2 --pages 96 --out bench/results/<run>/ --name split

Against the stand-in server (another process: not counted), instant or, with `--delay-s`, answering each
page that many seconds after it came (`--concurrency` pages in flight: the pace of a GPU server). `--profile` also samples
the parent's Python stacks (cProfile, its own overhead included: for shares, not totals) into
<name>-parent.prof.txt. `--client-cpus 0,1` pins the client (the parent, and the render workers it starts) to those
CPUs once the stand-in runs (on the others): what the client sustains on two cores, as pages/s.
"""

from __future__ import annotations

import sys

if "--httpx2" in sys.argv:  # before anything imports httpx: the whole client on httpx2 (same API)
    import httpx2

    httpx2.alias_httpx()

import argparse
import asyncio
import cProfile
import io
import json
import os
import platform
import pstats
import shlex
import signal
import subprocess
import tempfile
import time
from functools import partial
from pathlib import Path
from typing import Any

import psutil

from ocrserve.bench.synthetic import make_pdf
from ocrserve.profiles import PROFILES
from tests.fakes.standin import start_standin


def _cpu(p: psutil.Process) -> float:
    t = p.cpu_times()
    return t.user + t.system


_STEPS: dict[str, list[float]] = {}


def _timed(fn, *args):
    """fn(*args) in a worker, with the worker's CPU seconds for it (its thread's clock: pickling aside)."""
    t = time.thread_time()
    out = fn(*args)
    return out, time.thread_time() - t


def _timing_pool() -> None:
    """ResilientPool.run with every task's own CPU in the worker recorded by the function's name."""
    from ocrserve.ingest.pool import ResilientPool

    run = ResilientPool.run

    async def timed_run(self, fn, *args, **kwargs):
        name = getattr(fn, "__name__", "?")
        out, cpu = await run(self, partial(_timed, partial(fn, **kwargs) if kwargs else fn), *args)
        _STEPS.setdefault(name, []).append(cpu)
        return out

    ResilientPool.run = timed_run  # type: ignore[method-assign]


def _perf(pids: list[int], path: str | None) -> subprocess.Popen | None:
    """`perf record` of these processes (their call graphs) until stopped; None without a path."""
    if not path:
        return None
    p = subprocess.Popen(
        ["perf", "record", "-F", "1999", "-g", "-o", path, "-p", ",".join(map(str, pids))],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    time.sleep(0.5)  # attached
    return p


def run(
    model: str,
    pages: int,
    concurrency: int,
    work: Path,
    profile: bool,
    perf: str | None = None,
    workers_n: int = 0,
    delay_s: float = 0.0,
    client_cpus: set[int] | None = None,
) -> dict[str, Any]:
    from ocrserve.pipeline.local import Converter

    # a warm-up document of 16 pages, then `pages` measured, in documents of 16
    files = [str(make_pdf(work / f"d{i}.pdf", 16, seed=i)) for i in range(1 + max(1, pages // 16))]
    with start_standin(root=PROFILES[model].checkpoint, delay_s=delay_s) as s:
        me = psutil.Process()
        server = {s.proc.pid} | {c.pid for c in psutil.Process(s.proc.pid).children(recursive=True)}

        got: list[Any] = []  # the summary kept out of go()'s result (asyncio.run's runner, closing, reprs it)

        async def go() -> tuple[dict[str, float], float]:
            if client_cpus:  # the stand-in keeps every CPU; the workers started below inherit the parent's
                os.sched_setaffinity(0, client_cpus)
            conv = Converter(
                engine="openai",
                model=model,
                server=s.url,
                output_dir=str(work / "out"),
                force=True,
                fallback=False,
                concurrency=concurrency,
                max_tokens=1024,
                render_workers=workers_n or None,
            )
            await conv.run(files[:1])  # the workers started and warm, the first document's imports done
            _STEPS.clear()
            workers = [c for c in me.children(recursive=True) if c.pid not in server]
            w0 = {c.pid: _cpu(c) for c in workers}
            p0 = _cpu(me)
            rec = _perf([me.pid] + [c.pid for c in workers], perf)
            prof = cProfile.Profile() if profile else None
            t0 = time.perf_counter()
            if prof:
                prof.enable()
            got.append(await conv.run(files[1:]))
            if prof:
                prof.disable()
            wall = time.perf_counter() - t0
            cpu = {"parent": _cpu(me) - p0, "workers": sum(_cpu(c) - w0[c.pid] for c in workers)}
            if rec is not None:
                rec.send_signal(signal.SIGINT)
                rec.wait()
            await conv.aclose()
            if prof:
                buf = io.StringIO()
                pstats.Stats(prof, stream=buf).sort_stats("tottime").print_stats(45)
                cpu["profile"] = buf.getvalue()  # type: ignore[assignment]
            return cpu, wall

        cpu, wall = asyncio.run(go())
        summary = got.pop()
    n = sum(len(r.document.pages) for r in summary.results if r.document is not None)
    assert n == pages and all(r.status == "ok" for r in summary.results), [r.error for r in summary.results]
    ms = 1000 / n
    steps = {k: round(sum(v) * ms, 2) for k, v in _STEPS.items()}
    out = {
        "pages": int(n),
        "wall_s": round(wall, 2),
        "pages_per_s": round(n / wall, 2),
        "parent_ms": round(cpu["parent"] * ms, 2),
        "workers_ms": round(cpu["workers"] * ms, 2),
        "total_ms": round((cpu["parent"] + cpu["workers"]) * ms, 2),
        "worker_steps_ms": steps,
        "workers_rest_ms": round(cpu["workers"] * ms - sum(steps.values()), 2),
    }
    if "profile" in cpu:
        out["profile"] = cpu["profile"]
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", choices=sorted(PROFILES), default="chandra-2")
    ap.add_argument("--pages", type=int, default=96)
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--perf", help="perf record the measured run (the parent and its workers) into this file")
    ap.add_argument("--delay-s", type=float, default=0.0, help="the stand-in's wait before each answer (a GPU's pace)")
    ap.add_argument("--httpx2", action="store_true", help="the whole client on httpx2 (httpx2.alias_httpx())")
    ap.add_argument("--render-workers", type=int, default=0, help="the pool's workers (0: the default)")
    ap.add_argument("--client-cpus", default="", help="pin the client to these CPUs (comma-separated ids)")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--name", default="split")
    a = ap.parse_args()
    a.out.mkdir(parents=True, exist_ok=True)
    _timing_pool()
    runs = []
    cpus = {int(c) for c in a.client_cpus.split(",") if c.strip()} or None
    for _ in range(a.rounds):
        with tempfile.TemporaryDirectory(prefix="split-") as tmp:
            runs.append(
                run(a.model, a.pages, a.concurrency, Path(tmp), a.profile, a.perf, a.render_workers, a.delay_s, cpus)
            )
    prof = [r.pop("profile", None) for r in runs]
    report = {
        "command": "python -m bench.pipeline_split " + shlex.join(sys.argv[1:]),
        "machine": f"{platform.processor() or platform.machine()} ({psutil.cpu_count()} cores), python {platform.python_version()}",
        "model": a.model,
        "note": "CPU ms a page after a warm-up document; worker_steps: each task's CPU in its worker (thread clock), by function; workers_rest: the workers' CPU besides (pickling, the pool's loop)",
        "runs": runs,
    }
    (a.out / f"{a.name}.json").write_text(json.dumps(report, indent=2) + "\n")
    if prof[0]:
        (a.out / f"{a.name}-parent.prof.txt").write_text("\n\n".join(p for p in prof if p))
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
