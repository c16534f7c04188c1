"""Three clients side by side on the same pages and server:

1. `pipeline`: ocrserve's pipeline (render workers, bounded prefetch, a full batch in flight, parsing
   and writing outputs) — what `ocrserve convert --server` does.
2. `plain`: what the Chandra CLI does: render and PNG-encode a batch of pages in the main process,
   send the batch as a pool of requests, wait for all of it, parse, then the next batch.
3. `ceiling`: the engine's ceiling: images rendered and encoded before the clock starts, all pages
   sent at full concurrency, nothing done with the answers.

Reported per mode: pages/s, prompt/output tokens/s, latency p50/p95/p99, client CPU seconds per
page, peak GPU memory (nvidia-smi) and the server's running/waiting requests over time (/metrics);
plus time to first token and to first closed block of a streamed page on an idle server, and a
model-FLOPs-utilization estimate from the profile's architecture.
"""

from __future__ import annotations

import asyncio
import io
import json
import logging
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from ocrserve.profiles import Profile, load_profile

log = logging.getLogger(__name__)

GPU_PEAK_TFLOPS = {"H200": 989.4, "H100": 989.4, "A100": 312.0, "L40S": 362.0, "L4": 121.0, "B200": 2250.0}


# ------------------------------------------------------------------------------------ sampling

class Sampler:
    """Background sampling of GPU memory (nvidia-smi), server queue (/metrics) and client RSS."""

    def __init__(self, server_root: str | None, interval: float = 0.5) -> None:
        self.server_root = server_root
        self.interval = interval
        self.gpu_mem_mib: list[float] = []
        self.queue: list[tuple[float, float, float]] = []  # (t, running, waiting)
        self.rss_mib: list[float] = []
        self._stop = threading.Event()
        self._t0 = time.perf_counter()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._smi = shutil.which("nvidia-smi")

    def __enter__(self) -> "Sampler":
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _loop(self) -> None:
        client = httpx.Client(timeout=2.0)
        try:
            while not self._stop.is_set():
                if self._smi:
                    try:
                        out = subprocess.run([self._smi, "--query-gpu=memory.used", "--format=csv,noheader,nounits"],
                                             capture_output=True, text=True, timeout=5).stdout
                        vals = [float(x) for x in out.split() if x.strip()]
                        if vals:
                            self.gpu_mem_mib.append(sum(vals))
                    except (OSError, ValueError, subprocess.SubprocessError):
                        pass
                if self.server_root:
                    try:
                        text = client.get(self.server_root + "/metrics").text
                        self.queue.append((time.perf_counter() - self._t0, _metric(text, "vllm:num_requests_running"),
                                           _metric(text, "vllm:num_requests_waiting")))
                    except httpx.HTTPError:
                        pass
                self.rss_mib.append(client_rss_mib())
                self._stop.wait(self.interval)
        finally:
            client.close()

    def summary(self) -> dict[str, Any]:
        running = [r for _, r, _ in self.queue]
        waiting = [w for _, _, w in self.queue]
        return {
            "peak_gpu_memory_mib": max(self.gpu_mem_mib) if self.gpu_mem_mib else None,
            "server_running_mean": round(statistics.fmean(running), 1) if running else None,
            "server_running_max": max(running) if running else None,
            "server_waiting_mean": round(statistics.fmean(waiting), 1) if waiting else None,
            "peak_client_rss_mib": round(max(self.rss_mib), 1) if self.rss_mib else None,
            "queue_series": [(round(t, 1), r, w) for t, r, w in self.queue[:: max(1, len(self.queue) // 60)]],
        }


def _metric(text: str, name: str) -> float:
    total = 0.0
    for line in text.splitlines():
        if line.startswith(name) and not line.startswith("#"):
            try:
                total += float(line.rsplit(" ", 1)[1])
            except (ValueError, IndexError):
                pass
    return total


def _proc_mem(p) -> int:
    """PSS where the OS has it (forked workers share pages: RSS would count them twice), else RSS."""
    try:
        return p.memory_full_info().pss
    except (AttributeError, Exception):  # noqa: BLE001 - no PSS on this OS / no permission
        return p.memory_info().rss


def client_rss_mib() -> float:
    """Memory of this process and all its children (render workers), in MiB (PSS on Linux)."""
    try:
        import psutil

        me = psutil.Process()
        total = _proc_mem(me)
        for c in me.children(recursive=True):
            try:
                total += _proc_mem(c)
            except psutil.Error:
                pass
        return total / 2**20
    except ImportError:
        import resource

        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def client_cpu_s() -> float:
    """CPU seconds of this process and its children (live ones included)."""
    try:
        import psutil

        me = psutil.Process()
        t = me.cpu_times()
        total = t.user + t.system + t.children_user + t.children_system
        for c in me.children(recursive=True):
            try:
                ct = c.cpu_times()
                total += ct.user + ct.system
            except psutil.Error:
                pass
        return total
    except ImportError:
        import resource

        a, b = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
        return a.ru_utime + a.ru_stime + b.ru_utime + b.ru_stime


def pct(values: list[float], q: float) -> float | None:
    if not values:
        return None
    v = sorted(values)
    k = min(len(v) - 1, max(0, int(round(q / 100 * (len(v) - 1)))))
    return round(v[k], 3)


# ------------------------------------------------------------------------------------ results

@dataclass
class ModeResult:
    mode: str
    pages: int = 0
    failed: int = 0
    wall_s: float = 0.0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latencies: list[float] = field(default_factory=list)
    cpu_s: float = 0.0
    sampler: dict[str, Any] = field(default_factory=dict)
    notes: str = ""

    def row(self) -> dict[str, Any]:
        return {
            "mode": self.mode, "pages": self.pages, "failed": self.failed, "wall_s": round(self.wall_s, 2),
            "pages_per_s": round(self.pages / self.wall_s, 3) if self.wall_s else None,
            "prompt_tokens_per_s": round(self.prompt_tokens / self.wall_s, 1) if self.wall_s else None,
            "output_tokens_per_s": round(self.completion_tokens / self.wall_s, 1) if self.wall_s else None,
            "latency_p50_s": pct(self.latencies, 50), "latency_p95_s": pct(self.latencies, 95),
            "latency_p99_s": pct(self.latencies, 99),
            "client_cpu_s_per_page": round(self.cpu_s / self.pages, 4) if self.pages else None,
            "prompt_tokens": self.prompt_tokens, "completion_tokens": self.completion_tokens,
            **{k: v for k, v in self.sampler.items() if k != "queue_series"},
            "queue_series": self.sampler.get("queue_series"), "notes": self.notes,
        }


# ------------------------------------------------------------------------------------ clients

def _root(server: str) -> str:
    from ocrserve.engines.openai import normalize_base_url

    return normalize_base_url(server)[: -len("/v1")]


def _served_model(server: str, api_key: str | None) -> str:
    from ocrserve.engines.openai import normalize_base_url

    r = httpx.get(normalize_base_url(server) + "/models", headers=_auth(api_key), timeout=30)
    r.raise_for_status()
    return r.json()["data"][0]["id"]


def _auth(api_key: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {api_key}"} if api_key else {}


def _body(model: str, profile: Profile, png: bytes, max_tokens: int, ignore_eos: bool, stream: bool = False) -> dict:
    from ocrserve.engines import chat

    return chat.body(model, chat.data_url(png, "image/png"), profile.prompt, profile.sampling, max_tokens,
                     stream=stream, ignore_eos=ignore_eos)


async def run_pipeline(files: list[Path], server: str, profile: Profile, *, concurrency: int, max_tokens: int,
                       ignore_eos: bool, api_key: str | None, out_dir: Path) -> ModeResult:
    from ocrserve.pipeline.local import Converter

    res = ModeResult("pipeline")
    cpu0 = client_cpu_s()
    conv = Converter(engine="openai", model=profile, output_dir=out_dir, force=True, fallback=False,
                     server=server, api_key=api_key, concurrency=concurrency, max_tokens=max_tokens,
                     ignore_eos=ignore_eos)
    t0 = time.perf_counter()
    try:
        summary = await conv.run([str(f) for f in files])
    finally:
        res.wall_s = time.perf_counter() - t0
        res.cpu_s = client_cpu_s() - cpu0
        await conv.aclose()
    for r in summary.results:
        if r.document is None:
            res.failed += 1
            continue
        for p in r.document.pages:
            res.pages += 1
            res.failed += p.status == "failed"
            res.prompt_tokens += p.prompt_tokens or 0
            res.completion_tokens += p.completion_tokens or 0
            if p.timings.engine_s is not None:
                res.latencies.append(p.timings.engine_s)
    return res


def _render_plain(path: str, index: int, profile: Profile) -> bytes:
    """The Chandra CLI's way: render at the profile's dpi, then PNG at the default compression."""
    import pypdfium2 as pdfium

    from ocrserve.ingest.raster import Budget, pdf_target

    doc = pdfium.PdfDocument(path)
    try:
        page = doc[index]
        w, h = page.get_size()
        W, H = pdf_target(w, h, Budget.from_profile(profile))
        scale = max(profile.pdf_dpi / 72, W / w)
        img = page.render(scale=scale).to_pil().convert("RGB")
        if img.size != (W, H):
            img = img.resize((W, H))
        buf = io.BytesIO()
        img.save(buf, format="PNG")
        return buf.getvalue()
    finally:
        doc.close()


def _page_list(files: list[Path]) -> list[tuple[str, int]]:
    import pypdfium2 as pdfium

    out = []
    for f in files:
        doc = pdfium.PdfDocument(str(f))
        out.extend((str(f), i) for i in range(len(doc)))
        doc.close()
    return out


def run_plain(files: list[Path], server: str, profile: Profile, *, batch: int, max_tokens: int, ignore_eos: bool,
              api_key: str | None) -> ModeResult:
    from ocrserve.engines.openai import normalize_base_url
    from ocrserve.parse import parse_output

    res = ModeResult("plain", notes=f"render + PNG (default level) in the main process, {batch} requests per batch, "
                                    "next batch after the whole batch")
    url = normalize_base_url(server) + "/chat/completions"
    model = _served_model(server, api_key)
    pages = _page_list(files)
    cpu0 = client_cpu_s()
    t0 = time.perf_counter()
    with httpx.Client(timeout=3600, headers=_auth(api_key)) as client, ThreadPoolExecutor(batch) as ex:
        def send(png: bytes) -> tuple[dict | None, float]:
            t = time.perf_counter()
            try:
                r = client.post(url, json=_body(model, profile, png, max_tokens, ignore_eos))
                r.raise_for_status()
                return r.json(), time.perf_counter() - t
            except httpx.HTTPError:
                return None, time.perf_counter() - t

        for i in range(0, len(pages), batch):
            chunk = pages[i:i + batch]
            pngs = [_render_plain(p, j, profile) for p, j in chunk]
            for data, lat in ex.map(send, pngs):
                res.pages += 1
                res.latencies.append(lat)
                if data is None:
                    res.failed += 1
                    continue
                usage = data.get("usage") or {}
                res.prompt_tokens += usage.get("prompt_tokens") or 0
                res.completion_tokens += usage.get("completion_tokens") or 0
                parse_output(data["choices"][0]["message"]["content"] or "", profile, (612, 792))
    res.wall_s = time.perf_counter() - t0
    res.cpu_s = client_cpu_s() - cpu0
    return res


async def _prerender(files: list[Path], profile: Profile) -> list[bytes]:
    from ocrserve.ingest.pool import ResilientPool, default_workers
    from ocrserve.ingest.raster import Budget, render_page

    pool = ResilientPool(default_workers())
    budget = Budget.from_profile(profile)
    try:
        rps = await asyncio.gather(*[pool.run(render_page, p, "pdf", i, budget, None, 10**9) for p, i in _page_list(files)])
    finally:
        pool.shutdown()
    return [rp.png for rp in rps]


async def run_ceiling(pngs: list[bytes], server: str, profile: Profile, *, concurrency: int, max_tokens: int,
                      ignore_eos: bool, api_key: str | None) -> ModeResult:
    from ocrserve.engines.openai import normalize_base_url

    res = ModeResult("ceiling", notes="pre-rendered, pre-encoded bodies; all pages at full concurrency; answers not parsed")
    url = normalize_base_url(server) + "/chat/completions"
    model = await asyncio.to_thread(_served_model, server, api_key)
    bodies = [json.dumps(_body(model, profile, png, max_tokens, ignore_eos)).encode() for png in pngs]
    sem = asyncio.Semaphore(concurrency)
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    cpu0 = client_cpu_s()
    async with httpx.AsyncClient(timeout=3600, limits=limits, headers={**_auth(api_key), "content-type": "application/json"}) as client:
        async def one(body: bytes) -> None:
            async with sem:
                t = time.perf_counter()
                try:
                    r = await client.post(url, content=body)
                    r.raise_for_status()
                    usage = r.json().get("usage") or {}
                    res.prompt_tokens += usage.get("prompt_tokens") or 0
                    res.completion_tokens += usage.get("completion_tokens") or 0
                except httpx.HTTPError:
                    res.failed += 1
                res.latencies.append(time.perf_counter() - t)
                res.pages += 1

        t0 = time.perf_counter()
        await asyncio.gather(*[one(b) for b in bodies])
        res.wall_s = time.perf_counter() - t0
    res.cpu_s = client_cpu_s() - cpu0
    return res


async def streaming_probe(pngs: list[bytes], server: str, profile: Profile, *, max_tokens: int, ignore_eos: bool,
                          api_key: str | None) -> dict[str, Any]:
    """Time to first token and to first closed block, one streamed page at a time on an idle server."""
    from ocrserve.engines.openai import normalize_base_url

    url = normalize_base_url(server) + "/chat/completions"
    model = await asyncio.to_thread(_served_model, server, api_key)
    ttft, ttfb = [], []
    async with httpx.AsyncClient(timeout=600, headers=_auth(api_key)) as client:
        for png in pngs:
            t0 = time.perf_counter()
            first = block = None
            text = ""
            async with client.stream("POST", url, json=_body(model, profile, png, max_tokens, ignore_eos, stream=True)) as r:
                async for line in r.aiter_lines():
                    if not line.startswith("data: ") or line == "data: [DONE]":
                        continue
                    try:
                        delta = json.loads(line[6:])["choices"][0]["delta"].get("content") or ""
                    except (ValueError, KeyError, IndexError):
                        continue
                    if delta and first is None:
                        first = time.perf_counter() - t0
                    text += delta
                    if block is None and re.search(r"</div\s*>", text, re.I):
                        block = time.perf_counter() - t0
            if first is not None:
                ttft.append(first)
            if block is not None:
                ttfb.append(block)
    return {
        "pages": len(pngs),
        "ttft_s": [round(x, 3) for x in ttft], "ttft_median_s": pct(ttft, 50),
        "first_block_s": [round(x, 3) for x in ttfb], "first_block_median_s": pct(ttfb, 50),
        "note": "first block: time until the first </div> closes in the stream (none with a weightless model's random text)",
    }


def mfu(result: ModeResult, profile: Profile, gpu_name: str | None, peak_tflops: float | None) -> dict[str, Any]:
    """Model FLOPs utilization: 2 x params x tokens for the decoder, 2 x vision params x patches for the vision tower."""
    if not result.wall_s or not result.pages:
        return {}
    decoder = (profile.params_b - profile.vision_params_b) * 1e9
    vision = profile.vision_params_b * 1e9
    prompt_text = 400 * result.pages
    image_tokens = max(0, result.prompt_tokens - prompt_text)
    flops = 2 * decoder * (result.prompt_tokens + result.completion_tokens) + 2 * vision * image_tokens * 4
    achieved = flops / result.wall_s / 1e12
    peak = peak_tflops
    if peak is None and gpu_name:
        peak = next((v for k, v in GPU_PEAK_TFLOPS.items() if k in gpu_name), None)
    return {"model_tflops_per_s": round(achieved, 1), "gpu_peak_bf16_tflops": peak,
            "mfu": round(achieved / peak, 4) if peak else None,
            "note": "dense matmul FLOPs only (attention not counted), per GPU, against the bf16 dense peak"}


# ------------------------------------------------------------------------------------ machine info

def machine_info(server: str | None) -> dict[str, Any]:
    from ocrserve import __version__

    info: dict[str, Any] = {
        "host": platform.node(), "platform": platform.platform(), "python": sys.version.split()[0],
        "cpu_count": os.cpu_count(), "ocrserve": __version__,
    }
    try:
        with open("/proc/cpuinfo") as f:
            info["cpu"] = next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")), None)
    except OSError:
        pass
    smi = shutil.which("nvidia-smi")
    if smi:
        try:
            out = subprocess.run([smi, "--query-gpu=name,memory.total,driver_version", "--format=csv,noheader"],
                                 capture_output=True, text=True, timeout=10).stdout.strip()
            info["gpus"] = [ln.strip() for ln in out.splitlines() if ln.strip()]
        except (OSError, subprocess.SubprocessError):
            pass
    for mod in ("httpx", "pypdfium2", "PIL", "vllm", "torch", "transformers"):
        try:
            m = __import__(mod)
            info[f"{mod}_version"] = getattr(m, "__version__", None) or getattr(getattr(m, "version", None), "PYPDFIUM_INFO", None)
        except Exception:  # noqa: BLE001
            pass
    if server:
        try:
            info["server_version"] = httpx.get(_root(server) + "/version", timeout=5).json()
        except Exception:  # noqa: BLE001
            info["server_version"] = None
    return info


# ------------------------------------------------------------------------------------ the run

def corpus_files(corpus: str | None, synthetic: int | None, work: Path, seed: int = 0) -> list[Path]:
    if synthetic:
        from ocrserve.bench.synthetic import make_pdf

        path = work / f"synthetic-{synthetic}-{seed}.pdf"
        if not path.exists():
            make_pdf(path, synthetic, seed=seed)
        return [path]
    if not corpus:
        raise ValueError("give a corpus folder/file or --synthetic N")
    p = Path(corpus)
    files = sorted(p.rglob("*.pdf")) if p.is_dir() else [p]
    if not files:
        raise ValueError(f"{corpus}: no PDF files")
    return files


def run_bench(
    *, server: str, corpus: str | None = None, synthetic: int | None = None, modes: list[str] | None = None,
    model: str = "chandra-1", concurrency: int = 128, plain_batch: int = 28, max_tokens: int = 1024,
    ignore_eos: bool = True, api_key: str | None = None, stream_probe: int = 5, gpu_peak_tflops: float | None = None,
    seed: int = 0, command: str | None = None, on_partial=None,
) -> dict[str, Any]:
    profile = load_profile(model)
    modes = modes or ["pipeline", "plain", "ceiling"]
    work = Path(tempfile.mkdtemp(prefix="ocrserve-bench-"))
    try:
        files = corpus_files(corpus, synthetic, work, seed)
        root = _root(server)
        report: dict[str, Any] = {
            "command": command or " ".join(sys.argv), "started": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
            "machine": machine_info(server), "model_profile": profile.name, "concurrency": concurrency,
            "plain_batch": plain_batch, "max_tokens": max_tokens, "ignore_eos": ignore_eos,
            "corpus": [str(f) for f in files] if not synthetic else f"synthetic: {synthetic} distinct pages (seed {seed})",
            "modes": {},
        }
        gpu_name = (report["machine"].get("gpus") or [None])[0]
        pngs: list[bytes] | None = None
        for mode in modes:
            log.info("bench mode %s", mode)
            with Sampler(root) as sampler:
                if mode == "pipeline":
                    r = asyncio.run(run_pipeline(files, server, profile, concurrency=concurrency, max_tokens=max_tokens,
                                                 ignore_eos=ignore_eos, api_key=api_key, out_dir=work / "out"))
                elif mode == "plain":
                    r = run_plain(files, server, profile, batch=plain_batch, max_tokens=max_tokens,
                                  ignore_eos=ignore_eos, api_key=api_key)
                elif mode == "ceiling":
                    if pngs is None:
                        pngs = asyncio.run(_prerender(files, profile))
                    r = asyncio.run(run_ceiling(pngs, server, profile, concurrency=concurrency, max_tokens=max_tokens,
                                                ignore_eos=ignore_eos, api_key=api_key))
                else:
                    raise ValueError(f"unknown bench mode {mode!r}: pipeline, plain, ceiling")
            r.sampler = sampler.summary()
            row = r.row()
            row.update(mfu(r, profile, gpu_name, gpu_peak_tflops))
            report["modes"][mode] = row
            if on_partial:
                on_partial(report)  # a run cut short still leaves the modes it finished
        if stream_probe:
            if pngs is None:
                pngs = asyncio.run(_prerender(files, profile))
            # pages not sent before would be best; the probe uses the last ones, after the caches saw them
            report["streaming_idle"] = asyncio.run(streaming_probe(pngs[-stream_probe:], server, profile,
                                                                   max_tokens=min(max_tokens, 256), ignore_eos=ignore_eos,
                                                                   api_key=api_key))
        m = report["modes"]
        if "pipeline" in m and m["pipeline"]["pages_per_s"]:
            p = m["pipeline"]["pages_per_s"]
            report["ratios"] = {
                "pipeline_vs_plain": round(p / m["plain"]["pages_per_s"], 3) if m.get("plain", {}).get("pages_per_s") else None,
                "pipeline_vs_ceiling": round(p / m["ceiling"]["pages_per_s"], 3) if m.get("ceiling", {}).get("pages_per_s") else None,
            }
        return report
    finally:
        shutil.rmtree(work, ignore_errors=True)


def write_report(report: dict[str, Any], out_dir: Path, name: str) -> tuple[Path, Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    jp, mp = out_dir / f"{name}.json", out_dir / f"{name}.md"
    jp.write_text(json.dumps(report, indent=2, default=str) + "\n")
    lines = [f"# Benchmark: {name}", "", f"- command: `{report['command']}`", f"- started: {report['started']}"]
    mi = report["machine"]
    lines.append(f"- machine: {mi.get('cpu')} ({mi.get('cpu_count')} cores); GPUs: {', '.join(mi.get('gpus') or ['none'])}")
    lines.append(f"- versions: python {mi.get('python')}, ocrserve {mi.get('ocrserve')}, vllm {mi.get('vllm_version')}, "
                 f"server {mi.get('server_version')}")
    lines.append(f"- corpus: {report['corpus']}; max_tokens {report['max_tokens']} (ignore_eos {report['ignore_eos']}); "
                 f"concurrency {report['concurrency']}; plain batch {report['plain_batch']}")
    lines += ["", "| mode | pages | failed | pages/s | prompt tok/s | output tok/s | p50 s | p95 s | p99 s | client CPU s/page | peak GPU MiB | server running (mean) | peak client RSS MiB | MFU |",
              "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for mode, r in report["modes"].items():
        lines.append("| " + " | ".join(str(x) for x in (
            mode, r["pages"], r["failed"], r["pages_per_s"], r["prompt_tokens_per_s"], r["output_tokens_per_s"],
            r["latency_p50_s"], r["latency_p95_s"], r["latency_p99_s"], r["client_cpu_s_per_page"],
            r.get("peak_gpu_memory_mib"), r.get("server_running_mean"), r.get("peak_client_rss_mib"), r.get("mfu"))) + " |")
    if report.get("ratios"):
        lines += ["", f"Ratios (same run, same pages): {report['ratios']}"]
    if report.get("streaming_idle"):
        s = report["streaming_idle"]
        lines += ["", f"Streaming on an idle server: time to first token median {s['ttft_median_s']} s over {s['pages']} pages; "
                      f"first closed block median {s['first_block_median_s']} s."]
    mp.write_text("\n".join(lines) + "\n")
    return jp, mp
