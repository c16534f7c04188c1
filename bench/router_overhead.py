"""What the router of `ocrserve serve` (ocrserve/vllm/router.py) costs, on the CPU against stand-in replicas.

1. Whole answers: the same page requests (a ~1 MB PNG each, as a rendered page is) sent straight to a
   replica and through the router over two replicas; added latency per request (p50) and the router's
   CPU per request.
2. Streams: concurrent `stream: true` answers, one SSE event a token, relayed by the router: events a
   second and the router's CPU per event.

    python -m bench.router_overhead [--requests 200] [--concurrency 16] [--streams 64] [--out DIR]
        [--delay-s S]   # each whole answer S seconds after it came (a GPU's pace: many requests held open)
        [--tree DIR]    # the router from another source tree (a before, to compare side by side)
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import io
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

import psutil
from PIL import Image

from ocrserve.engines.http import httpx  # the load client on httpx2 (128 in flight would slow httpx 0.x itself)
from tests.fakes.standin import start_standin
from tests.support.api import free_port

ROOT = Path(__file__).resolve().parents[1]


def page_png(side: int = 1024) -> bytes:
    buf = io.BytesIO()
    Image.frombytes("L", (side, side), os.urandom(side * side)).save(buf, format="PNG", compress_level=1)
    return buf.getvalue()  # each one its own (random) image


def body(png: bytes, **extra) -> bytes:
    url = "data:image/png;base64," + base64.b64encode(png).decode()
    return json.dumps(
        {
            "model": "chandra",
            "max_tokens": 256,
            "messages": [
                {
                    "role": "user",
                    "content": [{"type": "image_url", "image_url": {"url": url}}, {"type": "text", "text": "read"}],
                }
            ],
            **extra,
        }
    ).encode()


async def load(url: str, bodies: list[bytes], concurrency: int) -> list[float]:
    sem, lat = asyncio.Semaphore(concurrency), []
    async with httpx.AsyncClient(timeout=300, limits=httpx.Limits(max_connections=concurrency + 4)) as c:

        async def one(b: bytes) -> None:
            async with sem:
                t0 = time.perf_counter()
                r = await c.post(url + "/chat/completions", content=b, headers={"content-type": "application/json"})
                r.raise_for_status()
                lat.append(time.perf_counter() - t0)

        await asyncio.gather(*(one(b) for b in bodies))
    return lat


async def streams(url: str, bodies: list[bytes]) -> int:
    events = 0
    async with httpx.AsyncClient(timeout=300, limits=httpx.Limits(max_connections=len(bodies) + 4)) as c:

        async def one(b: bytes) -> None:
            nonlocal events
            async with c.stream(
                "POST", url + "/chat/completions", content=b, headers={"content-type": "application/json"}
            ) as r:
                async for line in r.aiter_lines():
                    events += line.startswith("data: ")

        await asyncio.gather(*(one(b) for b in bodies))
    return events


def cpu_s(p: psutil.Process) -> float:
    t = p.cpu_times()
    return t.user + t.system


def main() -> None:
    ap = argparse.ArgumentParser(prog="python -m bench.router_overhead", description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=200)
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--streams", type=int, default=64)
    ap.add_argument("--token-delay", type=float, default=0.01, help="stand-in seconds between streamed events")
    ap.add_argument("--delay-s", type=float, default=0.0, help="stand-in seconds before each whole answer (paced)")
    ap.add_argument("--tree", default=None, help="run the router from this source tree (default: this one)")
    ap.add_argument("--out", default=None, help="folder for router-overhead.json and .md (default: print only)")
    a = ap.parse_args()
    reps = [start_standin(), start_standin()]
    tree = Path(a.tree).resolve() if a.tree else ROOT
    sock_port = free_port()
    router = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "ocrserve.vllm.router",
            "--port",
            str(sock_port),
            "--replicas",
            ",".join(r.root for r in reps),
        ],
        cwd=tree,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(tree), os.environ.get("PYTHONPATH")]))},
    )
    url = f"http://127.0.0.1:{sock_port}/v1"
    try:
        for _ in range(200):
            try:
                if httpx.get(url[:-3] + "/health", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.05)
        proc = psutil.Process(router.pid)
        bodies = [body(page_png()) for _ in range(a.requests)]
        asyncio.run(load(url, bodies[:8], 4))  # warm both paths
        asyncio.run(load(reps[0].url, bodies[:8], 4))
        for r in reps:
            r.control(delay_s=a.delay_s)
        direct = asyncio.run(load(reps[0].url, bodies, a.concurrency))
        c0 = cpu_s(proc)
        routed = asyncio.run(load(url, bodies, a.concurrency))
        cpu_whole = cpu_s(proc) - c0
        n_events, wall, cpu_stream = 0, 1.0, 0.0
        if a.streams:
            for r in reps:
                r.control(delay_s=0.0, token_delay_s=a.token_delay, chunk_chars=4)
            sbodies = [body(page_png(64), stream=True) for _ in range(a.streams)]
            c0, t0 = cpu_s(proc), time.perf_counter()
            n_events = asyncio.run(streams(url, sbodies))
            wall, cpu_stream = time.perf_counter() - t0, cpu_s(proc) - c0
    finally:
        router.terminate()
        router.wait()
        for r in reps:
            r.stop()
    rep = {
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}",
        "request_body_bytes_mean": round(statistics.fmean(len(b) for b in bodies)),
        "command": "python -m bench.router_overhead " + " ".join(sys.argv[1:]),
        "router_tree": str(tree),
        "requests": a.requests,
        "concurrency": a.concurrency,
        "delay_s": a.delay_s,
        "latency_p50_direct_ms": round(1000 * statistics.median(direct), 1),
        "latency_p50_router_ms": round(1000 * statistics.median(routed), 1),
        "router_cpu_ms_per_request": round(1000 * cpu_whole / a.requests, 2),
        "streams": a.streams,
        "stream_events": n_events,
        "stream_events_per_s": round(n_events / wall),
        "router_cpu_us_per_event": round(1e6 * cpu_stream / max(1, n_events), 1),
    }
    text = "\n".join(f"| {k} | {v} |" for k, v in rep.items())
    print("| measure | value |\n|---|---|\n" + text)
    if a.out:
        out = Path(a.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "router-overhead.json").write_text(json.dumps(rep, indent=1) + "\n")
        (out / "router-overhead.md").write_text("| measure | value |\n|---|---|\n" + text + "\n")


if __name__ == "__main__":
    main()
