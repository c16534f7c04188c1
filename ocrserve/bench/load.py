"""The serving sweep's measuring side: the page corpus, one fixed-length load against a server's
endpoints, the server's own stage timings (/metrics deltas) and the GPU memory of its processes.

The load is the engine-ceiling client of `ocrserve bench` (pre-encoded requests, all pages at full
concurrency, answers not parsed), spread round-robin over the endpoints of a layout (one per
data-parallel replica), so it measures the server and not the client.
"""

from __future__ import annotations

import asyncio
import json
import re
import shutil
import subprocess
import threading
import time
from concurrent.futures import ProcessPoolExecutor
from typing import Any

import httpx

from ocrserve.bench.clients import _body
from ocrserve.bench.sampling import pct, run_uncounted
from ocrserve.bench.synthetic import standard_page_png
from ocrserve.profiles import Profile

# vLLM histograms whose per-request means name where a page's time goes
STAGE_METRICS = {
    "queue_s": "vllm:request_queue_time_seconds",
    "prefill_s": "vllm:request_prefill_time_seconds",
    "decode_s": "vllm:request_decode_time_seconds",
    "ttft_s": "vllm:time_to_first_token_seconds",
    "e2e_s": "vllm:e2e_request_latency_seconds",
}
COUNTERS = {
    "preemptions": "vllm:num_preemptions",
    "prompt_tokens": "vllm:prompt_tokens",
    "generation_tokens": "vllm:generation_tokens",
}


def standard_pages(n: int, seed: int = 0, workers: int | None = None) -> list[bytes]:
    """`n` distinct standard pages (Letter at 192 dpi, 1632x2112) as PNG bytes, drawn in parallel."""
    if n <= 0:
        return []
    seeds = [seed * 100_000 + i for i in range(n)]
    if n < 8:
        return [standard_page_png(s) for s in seeds]
    with ProcessPoolExecutor(workers) as ex:
        return list(ex.map(standard_page_png, seeds, chunksize=4))


def encode_bodies(pngs: list[bytes], profile: Profile, model: str, max_tokens: int) -> list[bytes]:
    """Request bodies as the ceiling client sends them: the profile's prompt byte for byte, fixed length."""
    return [json.dumps(_body(model, profile, png, max_tokens, ignore_eos=True)).encode() for png in pngs]


def parse_metrics(text: str) -> dict[str, float]:
    """Sums of every `name` / `name_sum` / `name_count` sample (all label sets added) of a Prometheus text page."""
    out: dict[str, float] = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = re.match(r"^([A-Za-z_:][\w:]*)(\{[^}]*\})?\s+([-+0-9.eEinfINFNaN]+)", line)
        if not m:
            continue
        try:
            out[m.group(1)] = out.get(m.group(1), 0.0) + float(m.group(3))
        except ValueError:
            continue
    return out


def metrics_delta(before: dict[str, float], after: dict[str, float]) -> dict[str, Any]:
    """Mean stage seconds per request and counter deltas between two /metrics snapshots."""
    out: dict[str, Any] = {}
    for key, name in STAGE_METRICS.items():
        n = after.get(name + "_count", 0.0) - before.get(name + "_count", 0.0)
        s = after.get(name + "_sum", 0.0) - before.get(name + "_sum", 0.0)
        out[key] = round(s / n, 3) if n > 0 else None
    for key, name in COUNTERS.items():
        v = after.get(name + "_total", after.get(name, 0.0)) - before.get(name + "_total", before.get(name, 0.0))
        out[key] = int(v)
    return out


async def _scrape(client: httpx.AsyncClient, roots: list[str]) -> dict[str, float]:
    total: dict[str, float] = {}
    for root in roots:
        try:
            r = await client.get(root + "/metrics", timeout=10)
            for k, v in parse_metrics(r.text).items():
                total[k] = total.get(k, 0.0) + v
        except httpx.HTTPError:
            pass
    return total


def full_load_rate(done_at: list[float], in_flight: int) -> float | None:
    """Pages/s while the server held `in_flight` requests the whole time: between the first wave's
    completion and the last wave's start (the `in_flight`-th completion to the `in_flight`-th from the
    end; all pages start at once, so the first and last waves are ramp and drain). None unless the
    run is long enough to have such a middle (at least 3 waves). The 10-90% steady rate can instead
    fall into a burst of completions when the run is only two waves long."""
    n, c = len(done_at), in_flight
    if c < 1 or n < 3 * c:
        return None
    t = sorted(done_at)
    a, b = t[c - 1], t[n - c - 1]
    return round((n - 2 * c) / (b - a), 3) if b > a else None


async def run_load(
    endpoints: list[str], bodies: list[bytes], *, concurrency: int, timeout_s: float = 1800
) -> dict[str, Any]:
    """Send every body once, `concurrency` in flight per endpoint; pages/s, latencies and the server's stage times."""
    if not endpoints:
        raise ValueError("no endpoints to measure")
    if concurrency < 1:
        raise ValueError(f"concurrency must be at least 1, got {concurrency}")
    roots = [e[: -len("/v1")] if e.endswith("/v1") else e for e in endpoints]
    sems = [asyncio.Semaphore(concurrency) for _ in endpoints]
    lat: list[float] = []
    done_at: list[float] = []
    counts = {"pages": 0, "failed": 0, "prompt_tokens": 0, "completion_tokens": 0}
    errors: list[str] = []  # the first five
    limits = httpx.Limits(
        max_connections=concurrency * len(endpoints) + 8, max_keepalive_connections=concurrency * len(endpoints) + 8
    )
    async with httpx.AsyncClient(
        timeout=timeout_s, limits=limits, headers={"content-type": "application/json"}
    ) as client:
        before = await _scrape(client, roots)
        t0 = time.perf_counter()

        async def one(i: int, body: bytes) -> None:
            k = i % len(endpoints)
            async with sems[k]:
                t = time.perf_counter()
                try:
                    r = await client.post(endpoints[k] + "/chat/completions", content=body)
                    r.raise_for_status()
                    usage = r.json().get("usage") or {}
                    counts["prompt_tokens"] += usage.get("prompt_tokens") or 0
                    counts["completion_tokens"] += usage.get("completion_tokens") or 0
                except httpx.HTTPError as e:
                    counts["failed"] += 1
                    if len(errors) < 5:
                        detail = getattr(getattr(e, "response", None), "text", "") or ""
                        errors.append(f"{type(e).__name__}: {e} {detail[:300]}".strip())
                now = time.perf_counter()
                lat.append(now - t)
                done_at.append(now - t0)
                counts["pages"] += 1

        await asyncio.gather(*(one(i, b) for i, b in enumerate(bodies)))
        wall = time.perf_counter() - t0
        after = await _scrape(client, roots)
    done_at.sort()
    steady = None
    if len(done_at) >= 10:
        a, b = done_at[len(done_at) // 10], done_at[(9 * len(done_at)) // 10]
        steady = round(0.8 * len(done_at) / (b - a), 3) if b > a else None
    res: dict[str, Any] = {**counts, "errors": errors}
    res.update(
        wall_s=round(wall, 2),
        pages_per_s=round(counts["pages"] / wall, 3) if wall else None,
        steady_pages_per_s=steady,
        full_load_pages_per_s=full_load_rate(done_at, concurrency * len(endpoints)),
        prompt_tokens_per_s=round(counts["prompt_tokens"] / wall, 1) if wall else None,
        output_tokens_per_s=round(counts["completion_tokens"] / wall, 1) if wall else None,
        latency_p50_s=pct(lat, 50),
        latency_p95_s=pct(lat, 95),
        server=metrics_delta(before, after),
        concurrency_per_endpoint=concurrency,
        endpoints=list(endpoints),
    )
    return res


class GpuMemory(threading.Thread):
    """Polls nvidia-smi: the GPU memory of each watched process tree (MiB) and the card's total used."""

    def __init__(self, period: float = 0.5) -> None:
        super().__init__(daemon=True)
        self.period = period
        self.smi = shutil.which("nvidia-smi")
        self.halt = threading.Event()
        self.lock = threading.Lock()
        self.watch: dict[str, int] = {}  # name -> root pid
        self.peak: dict[str, float] = {}  # name -> peak MiB of its processes
        self.total_peak = 0.0
        self.per_process_seen = False

    def add(self, name: str, pid: int) -> None:
        with self.lock:
            self.watch[name] = pid
            self.peak.setdefault(name, 0.0)

    def remove(self, name: str) -> None:
        with self.lock:
            self.watch.pop(name, None)

    def reset_total(self) -> float:
        with self.lock:
            v, self.total_peak = self.total_peak, 0.0
        return v

    @staticmethod
    def _query(smi: str, args: list[str]) -> list[list[str]]:
        out = run_uncounted([smi, *args, "--format=csv,noheader,nounits"], timeout=10)
        return [[c.strip() for c in ln.split(",")] for ln in out.splitlines() if ln.strip()]

    def sample(self) -> None:
        smi = self.smi
        if not smi:
            return
        try:
            total = sum(float(r[0]) for r in self._query(smi, ["--query-gpu=memory.used"]))
            apps = {
                int(r[0]): float(r[1])
                for r in self._query(smi, ["--query-compute-apps=pid,used_memory"])
                if len(r) >= 2 and r[0].isdigit() and r[1].replace(".", "", 1).isdigit()
            }
        except (OSError, subprocess.SubprocessError, ValueError):
            return
        with self.lock:
            self.total_peak = max(self.total_peak, total)
            watch = dict(self.watch)
        if apps:
            self.per_process_seen = True
        for name, pid in watch.items():
            used = sum(apps.get(p, 0.0) for p in _tree(pid))
            with self.lock:
                self.peak[name] = max(self.peak.get(name, 0.0), used)

    def run(self) -> None:
        while not self.halt.is_set():
            self.sample()
            self.halt.wait(self.period)

    def stop(self) -> None:
        self.halt.set()


def _tree(pid: int) -> list[int]:
    try:
        import psutil

        p = psutil.Process(pid)
        return [pid] + [c.pid for c in p.children(recursive=True)]
    except Exception:  # noqa: BLE001 - gone, or no psutil: the root alone
        return [pid]
