"""Benchmark reports: machine and versions, model-FLOPs utilization, the JSON and Markdown files."""

from __future__ import annotations

import json
import os
import platform
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx

from ocrserve.bench.clients import ModeResult, _root
from ocrserve.profiles import Profile

GPU_PEAK_TFLOPS = {"H200": 989.4, "H100": 989.4, "A100": 312.0, "L40S": 362.0, "L4": 121.0, "B200": 2250.0}


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
    return {
        "model_tflops_per_s": round(achieved, 1),
        "gpu_peak_bf16_tflops": peak,
        "mfu": round(achieved / peak, 4) if peak else None,
        "note": "dense matmul FLOPs only (attention not counted), per GPU, against the bf16 dense peak",
    }


# ------------------------------------------------------------------------------------ machine info


def gpu_lines() -> list[str] | None:
    """nvidia-smi's `name, memory.total, driver_version` line for each GPU; None without nvidia-smi or when it fails."""
    smi = shutil.which("nvidia-smi")
    if not smi:
        return None
    try:
        out = subprocess.run(
            [smi, "--query-gpu=name,memory.total,driver_version", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=10,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return [ln.strip() for ln in out.splitlines() if ln.strip()]


def machine_info(server: str | None) -> dict[str, Any]:
    from ocrserve import __version__

    info: dict[str, Any] = {
        "host": platform.node(),
        "platform": platform.platform(),
        "python": sys.version.split()[0],
        "cpu_count": os.cpu_count(),
        "ocrserve": __version__,
    }
    try:
        with open("/proc/cpuinfo") as f:
            info["cpu"] = next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")), None)
    except OSError:
        pass
    gpus = gpu_lines()
    if gpus is not None:
        info["gpus"] = gpus
    for mod in ("httpx", "pypdfium2", "PIL", "vllm", "torch", "transformers"):
        try:
            m = __import__(mod)
            info[f"{mod}_version"] = getattr(m, "__version__", None) or getattr(
                getattr(m, "version", None), "PYPDFIUM_INFO", None
            )
        except Exception:  # noqa: BLE001
            pass
    if server:
        try:
            info["server_version"] = httpx.get(_root(server) + "/version", timeout=5).json()
        except Exception:  # noqa: BLE001
            info["server_version"] = None
    return info


# ------------------------------------------------------------------------------------ the run


def write_report(report: dict[str, Any], out_dir: Path, name: str) -> tuple[Path, Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    jp, mp = out_dir / f"{name}.json", out_dir / f"{name}.md"
    jp.write_text(json.dumps(report, indent=2, default=str) + "\n")
    lines = [f"# Benchmark: {name}", "", f"- command: `{report['command']}`", f"- started: {report['started']}"]
    mi = report["machine"]
    lines.append(
        f"- machine: {mi.get('cpu')} ({mi.get('cpu_count')} cores); GPUs: {', '.join(mi.get('gpus') or ['none'])}"
    )
    lines.append(
        f"- versions: python {mi.get('python')}, ocrserve {mi.get('ocrserve')}, vllm {mi.get('vllm_version')}, "
        f"server {mi.get('server_version')}"
    )
    lines.append(
        f"- corpus: {report['corpus']}; max_tokens {report['max_tokens']} (ignore_eos {report['ignore_eos']}); "
        f"concurrency {report['concurrency']}; plain batch {report['plain_batch']}"
    )
    lines += [
        "",
        "| mode | pages | failed | pages/s | prompt tok/s | output tok/s | p50 s | p95 s | p99 s | client CPU s/page | peak GPU MiB | server running (mean) | peak client RSS MiB | MFU |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for mode, r in report["modes"].items():
        lines.append(
            "| "
            + " | ".join(
                str(x)
                for x in (
                    mode,
                    r["pages"],
                    r["failed"],
                    r["pages_per_s"],
                    r["prompt_tokens_per_s"],
                    r["output_tokens_per_s"],
                    r["latency_p50_s"],
                    r["latency_p95_s"],
                    r["latency_p99_s"],
                    r["client_cpu_s_per_page"],
                    r.get("peak_gpu_memory_mib"),
                    r.get("server_running_mean"),
                    r.get("peak_client_rss_mib"),
                    r.get("mfu"),
                )
            )
            + " |"
        )
    if report.get("ratios"):
        lines += ["", f"Ratios (same run, same pages): {report['ratios']}"]
    if report.get("streaming_idle"):
        s = report["streaming_idle"]
        lines += [
            "",
            f"Streaming on an idle server: time to first token median {s['ttft_median_s']} s over {s['pages']} pages; "
            f"first closed block median {s['first_block_median_s']} s.",
        ]
    st = report.get("client_cpu_stages")
    if st:
        lines += [
            "",
            f"Client CPU per page by stage ({st['pages']} pages one at a time, the measuring thread's CPU clock; "
            f"mean PNG {st.get('png_kib_mean')} KiB):",
            "",
            "| " + " | ".join(st["stages"]) + " | total |",
            "|" + "---|" * (len(st["stages"]) + 1),
            "| " + " | ".join(f"{v['mean_ms']} ms" for v in st["stages"].values()) + f" | {st['total_mean_ms']} ms |",
        ]
    mp.write_text("\n".join(lines) + "\n")
    return jp, mp
