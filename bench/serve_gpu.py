"""GPU benchmark of `ocrserve serve`: peak GPU memory, time to first token and pages/s, `--memory max`
in bf16 against `--memory lean` in fp8 at the same concurrency (issue 6).

On the GPU machine (after `source /tmp/gpu/env.sh`, which sets CHANDRA1_SHAPE and puts vllm on PATH):

    python bench/serve_gpu.py --out $OUT --config max-bf16          # one config a run (each < 10 min)
    python bench/serve_gpu.py --out $OUT --config lean-fp8
    python bench/serve_gpu.py --out $OUT --config lean-fp8 --eager  # quick functional check

Each run: starts `python -m ocrserve.vllm serve --model $CHANDRA1_SHAPE --load-format dummy ...`,
polls nvidia-smi (memory.used, every 0.25 s) from launch to stop, waits for health, measures time
to first token of streamed requests on the idle server (distinct pages, one at a time), then sends
`--pages` distinct synthetic pages (1632x2112, fixed output length with ignore_eos) at
`--concurrency` in flight and reports pages/s, then stops the server (SIGTERM) and checks that the
GPU is free again. Writes `<out>/serve_gpu_<config>.json` and the server logs under `<out>/<config>/`.
"""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import os
import platform
import random
import signal
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx

CONFIGS = {"max-bf16": ("max", "none"), "lean-fp8": ("lean", "fp8"), "lean-bf16": ("lean", "none"),
           "max-fp8": ("max", "fp8")}
ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # `python bench/serve_gpu.py` puts bench/ on the path, not the repository root
    sys.path.insert(0, str(ROOT))

from ocrserve.engines import chat  # noqa: E402  (after the path: the repository's package)
from ocrserve.profiles import load_profile  # noqa: E402


def gpu_used_mib(index: int) -> float | None:
    try:
        out = subprocess.run(["nvidia-smi", f"--id={index}", "--query-gpu=memory.used", "--format=csv,noheader,nounits"],
                             capture_output=True, text=True, timeout=10)
        return float(out.stdout.strip().splitlines()[0])
    except Exception:  # noqa: BLE001 - a missed sample is not fatal
        return None


class MemoryPoller(threading.Thread):
    def __init__(self, index: int, period: float = 0.25) -> None:
        super().__init__(daemon=True)
        self.index, self.period = index, period
        self.samples: list[tuple[float, float]] = []
        self.halt = threading.Event()
        self.t0 = time.monotonic()

    def run(self) -> None:
        while not self.halt.is_set():
            v = gpu_used_mib(self.index)
            if v is not None:
                self.samples.append((time.monotonic() - self.t0, v))
            self.halt.wait(self.period)

    def peak_gib(self, since: float = 0.0) -> float:
        vals = [v for t, v in self.samples if t >= since]
        return max(vals) / 1024 if vals else float("nan")


def synthetic_page(seed: int, w: int = 1632, h: int = 2112) -> str:
    """A distinct document-like page (text lines of random glyph blocks), as a PNG data URL."""
    from PIL import Image, ImageDraw

    rng = random.Random(seed)
    img = Image.new("L", (w, h), 255)
    d = ImageDraw.Draw(img)
    y = 120
    while y < h - 120:
        x = 120
        while x < w - 200:
            bw = rng.randint(20, 90)
            d.rectangle([x, y, x + bw, y + 22], fill=rng.randint(0, 80))
            x += bw + rng.randint(8, 20)
        y += rng.randint(34, 60)
    d.text((130, 60), f"page {seed} {rng.random():.12f}", fill=0)
    buf = io.BytesIO()
    img.save(buf, format="PNG", compress_level=1)
    return chat.data_url(buf.getvalue(), "image/png")


def request_body(model: str, image: str, max_tokens: int, stream: bool) -> dict:
    """The engines' Chandra request (chandra-1: greedy, top_p 0.1) for a page data URL, ignore_eos."""
    profile = load_profile("chandra-1")
    return chat.body(model, image, profile.prompt, profile.sampling, max_tokens, stream=stream, ignore_eos=True)


async def ttft(url: str, model: str, seeds: list[int]) -> list[float]:
    out = []
    async with httpx.AsyncClient(timeout=600) as c:
        for s in seeds:
            body = request_body(model, synthetic_page(s), 32, True)
            t0 = time.perf_counter()
            first = None
            async with c.stream("POST", f"{url}/v1/chat/completions", json=body) as r:
                r.raise_for_status()
                async for line in r.aiter_lines():
                    if line.startswith("data: ") and line != "data: [DONE]":
                        delta = json.loads(line[6:])["choices"][0].get("delta", {})
                        if first is None and delta.get("content"):
                            first = time.perf_counter() - t0
            out.append(first if first is not None else float("nan"))
    return out


async def load(url: str, model: str, pages: int, concurrency: int, max_tokens: int, seed0: int) -> dict:
    images = [synthetic_page(seed0 + i) for i in range(pages)]
    sem = asyncio.Semaphore(concurrency)
    done: list[float] = []
    errors = 0
    limits = httpx.Limits(max_connections=concurrency + 8, max_keepalive_connections=concurrency + 8)
    async with httpx.AsyncClient(timeout=1800, limits=limits) as c:
        t0 = time.perf_counter()

        async def one(img: str) -> None:
            nonlocal errors
            async with sem:
                r = await c.post(f"{url}/v1/chat/completions", json=request_body(model, img, max_tokens, False))
                if r.status_code != 200:
                    errors += 1
                done.append(time.perf_counter() - t0)

        await asyncio.gather(*(one(i) for i in images))
        wall = time.perf_counter() - t0
    done.sort()
    # steady state: between 10% and 90% of the pages finished (leaves out the ramp and the drain)
    a, b = done[len(done) // 10], done[(9 * len(done)) // 10]
    steady = (0.8 * len(done)) / (b - a) if b > a else float("nan")
    return {"pages": pages, "errors": errors, "wall_s": wall, "pages_per_s": pages / wall, "steady_pages_per_s": steady}


def convert_load(url: str, pages: int, concurrency: int, max_tokens: int, seed: int, workdir: Path) -> dict:
    """`ocrserve convert --server` over a synthetic PDF of `pages` distinct pages; pages/s from its own summary."""
    from ocrserve.bench.synthetic import make_pdf

    workdir.mkdir(parents=True, exist_ok=True)
    pdf = make_pdf(workdir / f"synthetic-{pages}.pdf", pages, seed=seed)
    cmd = [sys.executable, "-m", "ocrserve", "convert", str(pdf), "-o", str(workdir / "convert-out"), "--server", url,
           "--concurrency", str(concurrency), "--max-tokens", str(max_tokens), "--ignore-eos", "--no-fallback",
           "--force", "--json-log"]
    t0 = time.perf_counter()
    out = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    done = [json.loads(ln) for ln in out.stdout.splitlines() if ln.startswith("{") and '"run_done"' in ln]
    pages_failed = sum(json.loads(ln).get("pages_failed", 0) for ln in out.stdout.splitlines()
                       if ln.startswith("{") and '"doc_done"' in ln)
    res = {"client": "ocrserve convert --server", "command": " ".join(cmd), "exit_code": out.returncode,
           "process_wall_s": wall, "pages_failed": pages_failed, "stderr_tail": out.stderr[-1500:]}
    if done:
        d = done[-1]
        res.update(pages=d["pages"], wall_s=d["elapsed_s"], pages_per_s=d["pages"] / d["elapsed_s"] if d["elapsed_s"] else None)
    return res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "bench-out")))
    ap.add_argument("--config", choices=sorted(CONFIGS), action="append", help="repeatable; default max-bf16 then lean-fp8")
    ap.add_argument("--model", default=os.environ.get("CHANDRA1_SHAPE"), help="model folder (default $CHANDRA1_SHAPE)")
    ap.add_argument("--concurrency", type=int, default=128)
    ap.add_argument("--pages", type=int, default=256, help="distinct pages of the load (0: skip the load)")
    ap.add_argument("--max-tokens", type=int, default=1024, help="output tokens a page (ignore_eos)")
    ap.add_argument("--ttft-requests", type=int, default=5)
    ap.add_argument("--gpu", type=int, default=0)
    ap.add_argument("--port", type=int, default=8000)
    ap.add_argument("--eager", action="store_true", help="--enforce-eager (fast start, for functional checks)")
    ap.add_argument("--startup-timeout", type=float, default=480)
    ap.add_argument("--gpu-memory-gib", type=float, help="plan for this much GPU memory instead of asking nvidia-smi")
    ap.add_argument("--client", choices=["convert", "raw"], default="convert",
                    help="convert: the load is `ocrserve convert --server` over a synthetic PDF of --pages distinct pages; "
                         "raw: pre-encoded requests")
    ap.add_argument("--no-caches", action="store_true", help="prefix and multimodal caches off (benchmarks resending pages)")
    ap.add_argument("--keep-running", action="store_true", help="leave the server up (a later run benchmarks it)")
    a = ap.parse_args()
    if not a.model:
        sys.exit("no model: pass --model or set CHANDRA1_SHAPE (source /tmp/gpu/env.sh)")
    a.out.mkdir(parents=True, exist_ok=True)
    for cfg in a.config or ["max-bf16", "lean-fp8"]:
        run_config(a, cfg)


def run_config(a: argparse.Namespace, cfg: str) -> None:
    memory, quant = CONFIGS[cfg]
    logdir = a.out / cfg
    cmd = [sys.executable, "-m", "ocrserve.vllm", "serve", "--model", a.model, "--load-format", "dummy",
           "--memory", memory, "--quantization", quant, "--concurrency", str(a.concurrency), "--gpus", str(a.gpu),
           "--port", str(a.port), "--served-model-name", "chandra", "--log-dir", str(logdir),
           "--health-timeout", str(a.startup_timeout), "--max-restarts", "0"]
    if a.gpu_memory_gib:
        cmd += ["--gpu-memory-gib", str(a.gpu_memory_gib)]
    if a.eager:
        cmd.append("--enforce-eager")
    if a.no_caches:
        cmd += ["--mm-cache-gb", "0", "--no-prefix-caching"]
    url = f"http://127.0.0.1:{a.port}"
    poller = MemoryPoller(a.gpu)
    idle_before = gpu_used_mib(a.gpu)
    poller.start()
    t_launch = time.monotonic()
    console = open(a.out / f"serve_gpu_{cfg}.console.log", "w")
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=console, stderr=subprocess.STDOUT, start_new_session=True)
    result: dict = {"config": cfg, "memory": memory, "quantization": quant, "concurrency": a.concurrency,
                    "command": " ".join(cmd), "machine": platform.node(), "python": platform.python_version(),
                    "gpu_used_before_mib": idle_before}
    try:
        import vllm  # noqa: F401
        result["vllm"] = vllm.__version__
    except Exception as e:  # noqa: BLE001
        result["vllm"] = f"unknown ({e})"
    try:
        try:
            result["gpu"] = subprocess.run(["nvidia-smi", f"--id={a.gpu}", "--query-gpu=name,memory.total,driver_version",
                                            "--format=csv,noheader"], capture_output=True, text=True).stdout.strip()
        except OSError as e:
            result["gpu"] = f"unknown ({e})"
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"ocrserve serve exited with {proc.returncode}; see {console.name}")
            try:
                if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() - t_launch > a.startup_timeout + 30:
                raise RuntimeError("server not healthy in time")
            time.sleep(1)
        result["startup_s"] = time.monotonic() - t_launch
        result["gpu_used_ready_gib"] = (gpu_used_mib(a.gpu) or float("nan")) / 1024
        t = asyncio.run(ttft(url, "chandra", [10_000 + i for i in range(a.ttft_requests)]))
        result["ttft_s"] = t
        result["ttft_median_s"] = statistics.median(t)
        if a.pages:
            t_load = time.monotonic() - poller.t0
            seed0 = 100_000 * (1 + list(CONFIGS).index(cfg))
            if a.client == "convert":
                result["load"] = convert_load(url, a.pages, a.concurrency, a.max_tokens, seed0, a.out / cfg)
            else:
                result["load"] = asyncio.run(load(url, "chandra", a.pages, a.concurrency, a.max_tokens, seed0=seed0))
            result["load"]["max_tokens"] = a.max_tokens
            result["gpu_peak_during_load_gib"] = poller.peak_gib(since=t_load)
        result["ok"] = True
    except Exception as e:  # noqa: BLE001 - record and stop the server
        result["ok"] = False
        result["error"] = str(e)
    finally:
        if a.keep_running and proc.poll() is None:  # leave a started server up, even after a failed load
            poller.halt.set()
            poller.join()
            result["gpu_peak_gib"] = poller.peak_gib()
            result["kept_running"] = True
            (a.out / f"serve_gpu_{cfg}.json").write_text(json.dumps(result, indent=1))
            print(json.dumps({k: result.get(k) for k in ("config", "ok", "startup_s", "gpu_peak_gib", "ttft_median_s",
                                                         "load")}), flush=True)
            return
        proc.send_signal(signal.SIGTERM)
        try:
            result["serve_exit_code"] = proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            result["serve_exit_code"] = "killed"
        time.sleep(3)
        poller.halt.set()
        poller.join()
        result["gpu_peak_gib"] = poller.peak_gib()
        result["gpu_used_after_stop_mib"] = gpu_used_mib(a.gpu)
        result["memory_samples"] = poller.samples[::4]
        console.close()
        (a.out / f"serve_gpu_{cfg}.json").write_text(json.dumps(result, indent=1))
        summary = {k: result.get(k) for k in ("config", "ok", "error", "startup_s", "gpu_peak_gib", "gpu_used_ready_gib",
                                              "ttft_median_s", "load", "gpu_used_after_stop_mib")}
        print(json.dumps(summary), flush=True)


if __name__ == "__main__":
    main()
