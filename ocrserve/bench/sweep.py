"""Serving sweep: `ocrserve serve` with each of a list of configurations, the same distinct-page
corpus and fixed output length against each, one table (config, pages/s, p50/p95, peak memory).
The command is `ocrserve bench sweep` (ocrserve/cli/bench.py); the spec it runs (the load, the
configurations; `sweep_spec` reads the command's options) is sweep_spec.py's.

Each configuration is one `python -m ocrserve serve --load-format dummy --mm-cache-gb 0
--no-prefix-caching ...` (distinct pages: the caches only cost), flags after `--` going to `vllm
serve`. Every configuration is first planned with `ocrserve serve --dry-run` (exact vLLM commands,
planned GPU memory); `dry_run()` stops there. With `overlap` > 1 the next server starts while the
one before is measured, when both lean plans fit on the card (startup is mostly compilation on the
CPU; each then gets `--gpu-memory-utilization` of its own plan for vLLM's free-memory check at
start). A failing configuration is recorded with its error and the sweep goes on; results are
written after every configuration.
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
import traceback
from pathlib import Path
from typing import Any

from ocrserve.bench.latency import latency_probe
from ocrserve.bench.load import GpuMemory, encode_bodies, run_load, standard_pages
from ocrserve.bench.shape_tokenizer import renumber_added_tokens
from ocrserve.bench.sweep_report import machine_summary, write_sweep
from ocrserve.bench.sweep_server import Server, bench_config, log_tails, served_model
from ocrserve.bench.sweep_spec import SweepConfig, SweepSpec
from ocrserve.profiles import load_profile

__all__ = ["Sweep", "parse_plan", "resolve_model", "serve_argv"]

log = logging.getLogger(__name__)
SHARE_MARGIN = 0.04  # fraction of the card added to a lean plan for vLLM's start-up check
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "vocab.json", "merges.txt", "chat_template.json")


def serve_argv(
    cfg: SweepConfig,
    model: str,
    port: int,
    *,
    log_dir: Path | None = None,
    dry_run: bool = False,
    gpu_memory_gib: float | None = None,
    vllm_bin: str | None = None,
    health_timeout: float = 600,
    extra_vllm: list[str] | None = None,
) -> list[str]:
    """The `ocrserve serve` command line of one configuration (a model that is no folder: the profile's checkpoint)."""
    if not Path(model).is_dir():
        model = cfg.profile
    argv = [
        sys.executable,
        "-m",
        "ocrserve",
        "serve",
        "--model",
        model,
        "--load-format",
        "dummy",
        "--memory",
        cfg.memory,
        "--quantization",
        cfg.quantization,
        "--concurrency",
        str(cfg.concurrency),
        "--gpus",
        cfg.gpus,
        "--parallel",
        cfg.parallel,
        "--port",
        str(port),
        "--served-model-name",
        "chandra",
        "--mm-cache-gb",
        "0",
        "--no-prefix-caching",
        "--max-restarts",
        "0",
        "--health-timeout",
        f"{health_timeout:g}",
    ]
    if Path(model).is_dir():
        argv += ["--profile", cfg.profile]
    if cfg.max_num_batched_tokens:
        argv += ["--max-num-batched-tokens", str(cfg.max_num_batched_tokens)]
    if cfg.parallel == "epd":
        argv += ["--epd-encoders", str(cfg.epd_encoders)]
    if log_dir is not None:
        argv += ["--log-dir", str(log_dir)]
    if gpu_memory_gib:
        argv += ["--gpu-memory-gib", f"{gpu_memory_gib:g}"]
    if vllm_bin:
        argv += ["--vllm-bin", vllm_bin]
    if dry_run:
        argv.append("--dry-run")
    argv += cfg.serve_args
    tail = [*cfg.vllm_args, *(extra_vllm or [])]
    if tail:
        argv += ["--", *tail]
    return argv


def parse_plan(console: str) -> dict[str, Any]:
    """What `ocrserve serve` printed: planned total GiB, GPU size, the vLLM commands and the endpoints."""
    out: dict[str, Any] = {"commands": re.findall(r"^\s+\[[\w-]+\] (.+)$", console, re.M)}
    m = re.search(r"^\s+total\s+([\d.]+) GiB", console, re.M)
    out["planned_gib"] = float(m.group(1)) if m else None
    m = re.search(r"on a ([\d.]+) GiB GPU", console)
    out["gpu_gib"] = float(m.group(1)) if m else None
    m = re.search(r"^endpoints: (.+)$", console, re.M)
    out["endpoints"] = m.group(1).split() if m else []
    return out


def resolve_model(cfg: SweepConfig, default: str | None, work: Path) -> str:
    """The model folder of a configuration; a configs-only folder is completed with `tokenizer_from`'s tokenizer."""
    model = os.path.expandvars(cfg.model or default or cfg.profile)
    src = Path(model)
    if not src.is_dir() or not cfg.tokenizer_from or (src / "tokenizer.json").is_file():
        return model
    tok = Path(os.path.expandvars(cfg.tokenizer_from))
    if not (tok / "tokenizer.json").is_file():
        raise ValueError(f"{cfg.name}: tokenizer_from {tok} has no tokenizer.json")
    dest = work / f"model-{cfg.name}"
    if dest.exists():
        shutil.rmtree(dest)
    shutil.copytree(src, dest)
    for f in TOKENIZER_FILES:
        if (tok / f).is_file() and not (dest / f).exists():
            shutil.copy2(tok / f, dest / f)
    renumber_added_tokens(dest)
    return str(dest)


class Sweep:
    """Plans, starts, measures and stops each configuration of a spec; writes sweep.json and sweep.md."""

    def __init__(
        self,
        spec: SweepSpec,
        out: Path,
        *,
        model: str | None,
        work: Path,
        port: int = 8100,
        overlap: int = 1,
        gpu_memory_gib: float | None = None,
        vllm_bin: str | None = None,
        startup_timeout: float = 600,
        deadline_s: float | None = None,
        config_budget_s: float = 150,
        name: str = "sweep",
        command: str | None = None,
    ) -> None:
        self.spec, self.out, self.model, self.work, self.port = spec, out, model, work, port
        self.overlap, self.gpu_memory_gib, self.vllm_bin = max(1, overlap), gpu_memory_gib, vllm_bin
        self.startup_timeout, self.deadline_s, self.config_budget_s = startup_timeout, deadline_s, config_budget_s
        self.name, self.t0 = name, time.monotonic()
        self.report: dict[str, Any] = {
            "command": command or shlex.join(sys.argv),
            "started": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
            "pages": spec.pages,
            "max_tokens": spec.max_tokens,
            "seed": spec.seed,
            "corpus": f"{spec.pages} distinct standard pages (Letter at 192 dpi, 1632x2112 PNG; a configuration's "
            "`pages` overrides the count)",
            "overlap": self.overlap,
            "results": {},
        }
        self.env = {**os.environ}
        self.env["PYTHONPATH"] = os.pathsep.join(
            [str(Path(__file__).resolve().parents[2]), self.env.get("PYTHONPATH", "")]
        ).rstrip(os.pathsep)

    # ------------------------------------------------------------------ planning
    def plan(self) -> dict[str, dict[str, Any]]:
        plans = {}
        for _i, cfg in enumerate(self.spec.configs):
            rec: dict[str, Any] = {"config": cfg.model_dump(exclude_defaults=True)}
            try:
                model = resolve_model(cfg, self.model, self.work)
                argv = serve_argv(
                    cfg, model, self.port, dry_run=True, gpu_memory_gib=self.gpu_memory_gib, vllm_bin=self.vllm_bin
                )
                # planned in the environment the server will run in (a configuration's env over the sweep's)
                p = subprocess.run(argv, capture_output=True, text=True, env={**self.env, **cfg.env}, timeout=300)
                rec.update(parse_plan(p.stdout), model=model, plan_exit_code=p.returncode)
                if p.returncode != 0:
                    rec["error"] = (p.stderr or p.stdout).strip()[-800:]
            except (ValueError, OSError, subprocess.SubprocessError) as e:
                rec["error"] = str(e)
            plans[cfg.name] = rec
            self.report["results"][cfg.name] = {"name": cfg.name, "ok": False, "plan": rec}
        return plans

    # ------------------------------------------------------------------ running
    def _load_pages(self, cfg: SweepConfig) -> int:
        return cfg.pages or self.spec.pages

    def _elapsed(self) -> float:
        return time.monotonic() - self.t0

    def _share_args(self, rec: dict[str, Any], cfg: SweepConfig) -> list[str]:
        if self.overlap < 2 or cfg.memory != "lean" or not rec.get("planned_gib") or not rec.get("gpu_gib"):
            return []
        frac = min(0.95, rec["planned_gib"] / rec["gpu_gib"] + SHARE_MARGIN)
        return ["--gpu-memory-utilization", f"{frac:.2f}"]

    def dry_run(self) -> dict[str, Any]:
        """Plan every configuration (the exact vLLM commands, planned memory) and start nothing."""
        self.plan()
        for r in self.report["results"].values():
            r["dry_run"] = True
        self._write()
        return self.report

    def run(self, measure=None) -> dict[str, Any]:
        """Plan, then start, measure and stop each configuration; `measure(endpoints, bodies, concurrency)` replaces the load."""
        self.report["machine"] = machine_summary()
        plans = self.plan()
        todo = [c for c in self.spec.configs if "error" not in plans[c.name]]
        n_load = max([self._load_pages(c) for c in todo if c.load] or [0])
        profile_pngs = standard_pages(n_load + self.spec.prefill_pages, seed=self.spec.seed)
        self.report["corpus_bytes"] = sum(len(p) for p in profile_pngs)
        pngs, prefill_pngs = profile_pngs[:n_load], profile_pngs[n_load:]
        gpu = GpuMemory()
        gpu.start()
        running: list[tuple[SweepConfig, Server]] = []
        slot = 0
        try:
            while todo or running:
                while todo and len(running) < self.overlap and self._fits(plans, running, todo[0]):
                    if self.deadline_s and self._elapsed() + self.config_budget_s > self.deadline_s:
                        for c in todo:
                            self.report["results"][c.name]["error"] = "skipped: not enough time left in this run"
                        todo = []
                        break
                    cfg = todo.pop(0)
                    port = self.port + 10 * (slot % 4)
                    slot += 1
                    running.append((cfg, self._start(cfg, plans[cfg.name], port, gpu)))
                if not running:
                    break
                cfg, srv = running.pop(0)
                self._measure(cfg, srv, pngs, prefill_pngs, gpu, running, measure)
                self._write()
        finally:
            for cfg, srv in running:
                srv.stop()
                gpu.remove(cfg.name)
            gpu.stop()
            self._write()
        return self.report

    def _fits(
        self, plans: dict[str, dict[str, Any]], running: list[tuple[SweepConfig, Server]], nxt: SweepConfig
    ) -> bool:
        if not running:
            return True
        planned = [plans[c.name].get("planned_gib") for c, _ in running] + [plans[nxt.name].get("planned_gib")]
        need = [float(g) for g in planned if g is not None]
        gpu_gib = plans[nxt.name].get("gpu_gib")
        same_gpus = all(c.gpus == nxt.gpus for c, _ in running)
        if (
            len(need) < len(planned)  # a plan without its figure
            or not gpu_gib
            or not same_gpus
            or nxt.memory != "lean"
            or any(c.memory != "lean" for c, _ in running)
        ):
            return False
        return sum(need) + SHARE_MARGIN * gpu_gib * len(need) <= 0.95 * gpu_gib

    def _start(self, cfg: SweepConfig, rec: dict[str, Any], port: int, gpu: GpuMemory) -> Server:
        log_dir = self.work / "logs" / cfg.name
        log_dir.mkdir(parents=True, exist_ok=True)
        argv = serve_argv(
            cfg,
            rec["model"],
            port,
            log_dir=log_dir,
            gpu_memory_gib=self.gpu_memory_gib,
            vllm_bin=self.vllm_bin,
            health_timeout=self.startup_timeout,
            extra_vllm=self._share_args(rec, cfg),
        )
        res = self.report["results"][cfg.name]
        res.update(serve_command=shlex.join(argv), started_at_s=round(self._elapsed(), 1))
        log.info("starting %s: %s", cfg.name, res["serve_command"])
        srv = Server(cfg, argv, self.work / f"{cfg.name}.console.log", {**self.env, **cfg.env})
        gpu.add(cfg.name, srv.proc.pid)
        return srv

    def _measure(
        self,
        cfg: SweepConfig,
        srv: Server,
        pngs: list[bytes],
        prefill_pngs: list[bytes],
        gpu: GpuMemory,
        others: list[tuple[SweepConfig, Server]],
        measure,
    ) -> None:
        res = self.report["results"][cfg.name]
        measure = measure or (
            lambda endpoints, bodies, conc: asyncio.run(run_load(endpoints, bodies, concurrency=conc))
        )
        try:
            srv.wait_ready(self.startup_timeout + 60)
            res["startup_s"] = round(srv.ready_s or 0.0, 1)
            endpoints = parse_plan(srv.console())["endpoints"]
            model = served_model(endpoints[0])
            profile = load_profile(cfg.profile)
            conc = cfg.client_concurrency or cfg.concurrency
            # once this one is ready: the servers still starting beside its measurement
            res["measured_while_starting"] = [c.name for c, s in others if s.ready_s is None]
            if cfg.latency_probe:
                res["latency"] = asyncio.run(latency_probe(endpoints[0], model, profile, prefill_pngs[:5] or pngs[:5]))
            gpu.reset_total()
            if cfg.load:
                load_pngs = pngs[: self._load_pages(cfg)]
                res["load"] = measure(endpoints, encode_bodies(load_pngs, profile, model, self.spec.max_tokens), conc)
                res["total_gpu_peak_gib_during_load"] = round(gpu.reset_total() / 1024, 2)
            for c in cfg.curve:
                n = min(len(pngs), c * cfg.curve_waves * len(endpoints))
                point = measure(endpoints, encode_bodies(pngs[:n], profile, model, self.spec.max_tokens), c)
                res.setdefault("curve", {})[str(c)] = point
            if cfg.prefill_probe and prefill_pngs:
                res["prefill_only"] = measure(endpoints, encode_bodies(prefill_pngs, profile, model, 1), conc)
            if cfg.bench_modes:
                res["bench"] = bench_config(cfg, endpoints[0], conc, self.spec.max_tokens)
            res["ok"] = (
                (res["load"]["failed"] == 0 if cfg.load else True)
                and all(not p.get("failed") for p in (res.get("curve") or {}).values())
                and all(not m.get("failed") for m in (res.get("bench") or {}).get("modes", {}).values())
            )
        except Exception as e:  # noqa: BLE001 - a failing configuration is a result; the sweep goes on
            res["error"] = f"{type(e).__name__}: {e}"
            # where it failed: an error like `[Errno 2] No such file or directory` names no file
            res["error_trace"] = traceback.format_exc()[-3000:]
            log.warning("%s failed: %s", cfg.name, e)
        finally:
            res["serve_exit_code"] = srv.stop()
            time.sleep(2)
            gpu.sample()
            peak = gpu.peak.get(cfg.name, 0.0)
            gpu.remove(cfg.name)
            res["peak_gpu_gib"] = round(peak / 1024, 2) if gpu.per_process_seen else None
            res["vllm_commands"] = parse_plan(srv.console())["commands"]
            res["log_tail"] = (
                log_tails(self.work / "logs" / cfg.name)[-6000:] + "\n--- console\n" + srv.console()[-3000:]
            )

    # ------------------------------------------------------------------ output
    def _write(self) -> None:
        write_sweep(self.report, self.out, self.name)
