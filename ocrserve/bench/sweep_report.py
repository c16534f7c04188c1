"""The serving sweep's output: the machine line, the table rows, the JSON and Markdown files."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

from ocrserve.bench.latency import KINDS
from ocrserve.bench.report import gpu_lines


def machine_summary() -> str:
    """GPU(s), driver and the versions that matter, without importing the heavy packages."""
    from importlib import metadata

    parts = []
    gpus = gpu_lines()
    if gpus is not None:
        parts.append("; ".join(gpus))
    parts.append(f"{os.cpu_count()} CPUs, python {sys.version.split()[0]}")
    for pkg in ("ocrserve", "vllm", "torch", "transformers"):
        try:
            parts.append(f"{pkg} {metadata.version(pkg)}")
        except metadata.PackageNotFoundError:
            try:
                mod = __import__(pkg) if pkg == "ocrserve" else None
                parts.append(f"{pkg} {getattr(mod, '__version__', '?')}" if mod else f"{pkg} not installed")
            except ImportError:
                parts.append(f"{pkg} not installed")
    return ", ".join(parts)


def table_rows(report: dict[str, Any]) -> list[dict[str, Any]]:
    rows = []
    for name, r in report["results"].items():
        load = r.get("load") or {}
        pre = r.get("prefill_only") or {}
        srv = load.get("server") or {}
        rows.append(
            {
                "config": name,
                "ok": r.get("ok"),
                "pages": load.get("pages"),
                "pages_per_s": load.get("pages_per_s"),
                "steady_pages_per_s": load.get("steady_pages_per_s"),
                "full_load_pages_per_s": load.get("full_load_pages_per_s"),
                "p50_s": load.get("latency_p50_s"),
                "p95_s": load.get("latency_p95_s"),
                "prompt_tok_s": load.get("prompt_tokens_per_s"),
                "output_tok_s": load.get("output_tokens_per_s"),
                "peak_gpu_gib": r.get("peak_gpu_gib"),
                "planned_gib": (r.get("plan") or {}).get("planned_gib"),
                "startup_s": r.get("startup_s"),
                "prefill_only_pages_per_s": pre.get("pages_per_s"),
                "server_prefill_s": srv.get("prefill_s"),
                "server_decode_s": srv.get("decode_s"),
                "server_queue_s": srv.get("queue_s"),
                "preemptions": srv.get("preemptions"),
                "failed": load.get("failed"),
                "error": (r.get("error") or (r.get("plan") or {}).get("error") or "")[:160].replace("\n", " "),
            }
        )
    return rows


def write_sweep(report: dict[str, Any], out: Path, name: str = "sweep") -> tuple[Path, Path]:
    """sweep JSON (everything) and Markdown (the table, the exact commands) under `out`."""
    out.mkdir(parents=True, exist_ok=True)
    jp, mp = out / f"{name}.json", out / f"{name}.md"
    jp.write_text(json.dumps(report, indent=1, default=str) + "\n")
    cols = [
        "config",
        "pages",
        "pages_per_s",
        "steady_pages_per_s",
        "full_load_pages_per_s",
        "p50_s",
        "p95_s",
        "prompt_tok_s",
        "output_tok_s",
        "peak_gpu_gib",
        "planned_gib",
        "startup_s",
        "prefill_only_pages_per_s",
        "server_prefill_s",
        "server_decode_s",
        "server_queue_s",
        "preemptions",
        "failed",
        "error",
    ]
    lines = [
        f"# Serving sweep: {name}",
        "",
        f"- command: `{report['command']}`",
        f"- started: {report['started']}",
        f"- load: {report['corpus']}, max_tokens {report['max_tokens']} with ignore_eos, pre-encoded requests "
        f"(the engine ceiling); overlap {report['overlap']}",
        "",
    ]
    if report.get("machine"):
        lines.insert(4, f"- machine: {report['machine']}")
    lines += ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for row in table_rows(report):
        lines.append("| " + " | ".join("" if row[c] is None else str(row[c]) for c in cols) + " |")
    benches = {n: r["bench"] for n, r in report["results"].items() if r.get("bench")}
    if benches:
        lines += [
            "",
            "`ocrserve bench` against a configuration (the same synthetic PDF pages for every mode):",
            "",
            "| config | pages | pipeline pages/s | plain pages/s | ceiling pages/s | pipeline / ceiling | "
            "pipeline / plain | client CPU ms/page (pipeline) | stages sum ms/page | TTFT idle s |",
            "|---|---|---|---|---|---|---|---|---|---|",
        ]
        for n, b in benches.items():
            lines.append("| " + " | ".join("" if v is None else str(v) for v in bench_row(n, b)) + " |")
    lines += curve_lines(report) + latency_lines(report)
    lines += [
        "",
        "Server stage columns are vLLM's own per-request means over the load (/metrics deltas): "
        "prefill = scheduled to first token (vision tower + prefill), decode = first to last token.",
        "",
        "## Commands",
        "",
    ]
    for rname, r in report["results"].items():
        lines.append(
            f"- **{rname}**: `{r.get('serve_command') or ' '.join((r.get('plan') or {}).get('commands') or [])}`"
        )
        for c in r.get("vllm_commands") or (r.get("plan") or {}).get("commands") or []:
            lines.append(f"  - vllm: `{c}`")
    mp.write_text("\n".join(lines) + "\n")
    return jp, mp


def bench_row(name: str, b: dict[str, Any]) -> list[Any]:
    m, ratios = b.get("modes") or {}, b.get("ratios") or {}
    pps = {k: (m.get(k) or {}).get("pages_per_s") for k in ("pipeline", "plain", "ceiling")}
    cpu = (m.get("pipeline") or {}).get("client_cpu_s_per_page")
    st = b.get("client_cpu_stages") or {}
    pages = next((v.get("pages") for v in m.values() if v.get("pages")), None)
    return [
        name,
        pages,
        pps["pipeline"],
        pps["plain"],
        pps["ceiling"],
        ratios.get("pipeline_vs_ceiling"),
        ratios.get("pipeline_vs_plain"),
        round(cpu * 1000, 1) if cpu is not None else None,
        st.get("total_mean_ms"),
        (b.get("streaming_idle") or {}).get("ttft_median_s"),
    ]


def curve_lines(report: dict[str, Any]) -> list[str]:
    """Pages/s against requests in flight: each configuration's curve points and its main load."""
    rows = []
    for name, r in report["results"].items():
        points = dict(r.get("curve") or {})
        if r.get("load") and points:
            points[str(r["load"].get("concurrency_per_endpoint"))] = r["load"]
        for c, ld in sorted(points.items(), key=lambda kv: int(kv[0])):
            srv = ld.get("server") or {}
            rows.append(
                f"| {name} | {c} | {ld.get('pages')} | {ld.get('pages_per_s')} | {ld.get('full_load_pages_per_s')} | "
                f"{ld.get('latency_p50_s')} | {srv.get('queue_s')} | {srv.get('preemptions')} | {ld.get('failed')} |"
            )
    if not rows:
        return []
    head = [
        "",
        "Requests in flight against pages/s (one server a configuration; pages: this many distinct pre-encoded):",
        "",
        "| config | in flight | pages | pages/s | full-load pages/s | p50 s | vLLM queue s | preemptions | failed |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    return head + rows


def latency_lines(report: dict[str, Any]) -> list[str]:
    """The idle latency probe (bench/latency.py): medians per kind and the split of a page's first token."""
    out = []
    for name, r in report["results"].items():
        lat = r.get("latency")
        if not lat:
            continue
        out += [
            "",
            f"Idle latency, {name} ({lat['repeats']} requests a kind, streamed, after a warm-up; "
            f"first block = the {lat['block_tokens']}th token):",
            "",
            "| kind | request bytes | TTFT median s | first block median s | inter-token s | vLLM queue s | "
            "vLLM prefill s | vLLM TTFT s |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for kind in KINDS:
            if kind not in lat:
                continue
            k, srv = lat.get(kind) or {}, (lat.get(kind) or {}).get("server") or {}
            out.append(
                f"| {kind} | {k.get('body_bytes', '—')} | {k.get('ttft_median_s', k.get('error'))} | "
                f"{k.get('block_median_s')} | {k.get('inter_token_s')} | "
                f"{srv.get('queue_s')} | {srv.get('prefill_s')} | {srv.get('ttft_s')} |"
            )
        for what, v in (lat.get("split_s") or {}).items():
            out.append(f"- {what}: {v} s")
    return out
