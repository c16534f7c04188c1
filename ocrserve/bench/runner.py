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
import logging
import shutil
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from ocrserve.bench.clients import (
    Load,
    ModeResult,
    _prerender,
    _root,
    run_ceiling,
    run_pipeline,
    run_plain,
    streaming_probe,
)
from ocrserve.bench.report import GPU_PEAK_TFLOPS, machine_info, mfu, write_report
from ocrserve.bench.sampling import Sampler, client_cpu_s, client_rss_mib, pct
from ocrserve.profiles import Profile

__all__ = [
    "GPU_PEAK_TFLOPS",
    "ModeResult",
    "Sampler",
    "client_cpu_s",
    "client_rss_mib",
    "corpus_files",
    "machine_info",
    "mfu",
    "pct",
    "run_bench",
    "write_report",
]

log = logging.getLogger(__name__)


# ------------------------------------------------------------------------------------ the run


def synthetic_kind() -> str:
    """Which synthetic pages make_pdf writes here: born-digital with reportlab, else scanned images."""
    import importlib.util

    return (
        "born-digital (reportlab)"
        if importlib.util.find_spec("reportlab")
        else "scanned: Pillow-drawn page images, reportlab is not installed"
    )


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


def bench_profile(model: str | None, server: str, api_key: str | None = None) -> Profile:
    """The profile every mode sends pages with, as `ocrserve convert --server` decides it: `model` checked
    against what the server serves, or with none given the served model's (else chandra-2). ValueError
    when the server cannot be used or serves another model."""
    from ocrserve.engines import EngineError, create_engine

    async def go() -> Profile:
        eng = create_engine("openai", model, server=server, api_key=api_key)  # the rest from Settings, as convert
        try:
            await eng.preflight()
            return eng.profile
        finally:
            await eng.aclose()

    try:
        return asyncio.run(go())
    except EngineError as e:
        raise ValueError(str(e)) from None


def run_bench(
    *,
    server: str,
    corpus: str | None = None,
    synthetic: int | None = None,
    modes: list[str] | None = None,
    model: str | None = None,
    concurrency: int = 128,
    plain_batch: int = 28,
    max_tokens: int = 1024,
    ignore_eos: bool = True,
    api_key: str | None = None,
    stream_probe: int = 5,
    gpu_peak_tflops: float | None = None,
    seed: int = 0,
    command: str | None = None,
    on_partial=None,
    stage_pages: int = 40,
    plain_pages: int | None = None,
) -> dict[str, Any]:
    modes = modes or ["pipeline", "plain", "ceiling", "stages"]
    work = Path(tempfile.mkdtemp(prefix="ocrserve-bench-"))
    try:
        files = corpus_files(corpus, synthetic, work, seed)
        profile = bench_profile(model, server, api_key)
        root = _root(server)
        report: dict[str, Any] = {
            "command": command or " ".join(sys.argv),
            "started": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
            "machine": machine_info(server),
            "model_profile": profile.name,
            "concurrency": concurrency,
            "plain_batch": plain_batch,
            "max_tokens": max_tokens,
            "ignore_eos": ignore_eos,
            "corpus": [str(f) for f in files]
            if not synthetic
            else f"synthetic: {synthetic} distinct pages (seed {seed}, {synthetic_kind()})",
            "modes": {},
        }
        gpu_name = (report["machine"].get("gpus") or [None])[0]
        pngs: list[bytes] | None = None
        # what every mode's requests ask for
        load = Load(server, profile, max_tokens, ignore_eos, api_key)
        for mode in modes:
            log.info("bench mode %s", mode)
            if mode == "stages":  # client CPU per stage, one page at a time (not a throughput mode)
                from ocrserve.bench.stages import stage_profile

                report["client_cpu_stages"] = stage_profile(
                    files,
                    server,
                    profile,
                    max_pages=stage_pages,
                    max_tokens=max_tokens,
                    ignore_eos=ignore_eos,
                    api_key=api_key,
                )
                if on_partial:
                    on_partial(report)
                continue
            with Sampler(root) as sampler:
                if mode == "pipeline":
                    r = asyncio.run(run_pipeline(files, load, concurrency=concurrency, out_dir=work / "out"))
                elif mode == "plain":
                    r = run_plain(files, load, batch=plain_batch, max_pages=plain_pages)
                elif mode == "ceiling":
                    if pngs is None:
                        pngs = asyncio.run(_prerender(files, profile))
                    r = asyncio.run(run_ceiling(pngs, load, concurrency=concurrency))
                else:
                    raise ValueError(f"unknown bench mode {mode!r}: pipeline, plain, ceiling, stages")
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
            report["streaming_idle"] = asyncio.run(
                streaming_probe(pngs[-stream_probe:], replace(load, max_tokens=min(max_tokens, 256)))
            )
        m = report["modes"]
        if "pipeline" in m and m["pipeline"]["pages_per_s"]:
            p = m["pipeline"]["pages_per_s"]
            report["ratios"] = {
                "pipeline_vs_plain": round(p / m["plain"]["pages_per_s"], 3)
                if m.get("plain", {}).get("pages_per_s")
                else None,
                "pipeline_vs_ceiling": round(p / m["ceiling"]["pages_per_s"], 3)
                if m.get("ceiling", {}).get("pages_per_s")
                else None,
            }
        return report
    finally:
        shutil.rmtree(work, ignore_errors=True)
