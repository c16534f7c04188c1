"""One started `ocrserve serve` of the sweep (its own process group, readiness watched from the start),
its log tails, and the `ocrserve bench` modes run against it."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import httpx

from ocrserve.bench.sampling import exclude_from_client, reap_uncounted


class Server:
    """One started `ocrserve serve` (its own process group), its console and readiness."""

    def __init__(self, cfg: Any, argv: list[str], console: Path, env: dict[str, str]) -> None:
        self.cfg, self.argv, self.console_path = cfg, argv, console
        self.fh = open(console, "w")
        self.t0 = time.monotonic()
        self.proc = subprocess.Popen(argv, stdout=self.fh, stderr=subprocess.STDOUT, start_new_session=True, env=env)
        exclude_from_client(self.proc.pid)  # a server, not the client whose CPU the bench modes measure
        self.ready_s: float | None = None
        # readiness is watched from the start, so a server that got ready while another was measured has its true time
        threading.Thread(target=self._watch, daemon=True).start()

    def _watch(self) -> None:
        while self.ready_s is None and reap_uncounted(self.proc) is None:
            if re.search(r"^ready", self.console(), re.M):
                self.ready_s = time.monotonic() - self.t0
                return
            time.sleep(1)

    def console(self) -> str:
        try:
            return self.console_path.read_text(errors="replace")
        except OSError:
            return ""

    def wait_ready(self, timeout: float) -> None:
        while True:
            text = self.console()
            if re.search(r"^ready", text, re.M):
                if self.ready_s is None:
                    self.ready_s = time.monotonic() - self.t0
                return
            if reap_uncounted(self.proc) is not None:
                tail = "\n".join(text.splitlines()[-15:])
                raise RuntimeError(f"ocrserve serve exited with {self.proc.returncode}:\n{tail}")
            if time.monotonic() - self.t0 > timeout:
                raise RuntimeError(f"not ready after {timeout:.0f} s")
            time.sleep(1)

    def stop(self, timeout: float = 60) -> Any:
        code: Any = reap_uncounted(self.proc)
        if code is None:
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)
                code = reap_uncounted(self.proc, timeout)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                code = "killed"
            except ProcessLookupError:
                code = reap_uncounted(self.proc)
        self.fh.close()
        return code


def log_tails(log_dir: Path, lines: int = 60) -> str:
    parts = []
    for f in sorted(log_dir.glob("*.log")):
        text = f.read_text(errors="replace").splitlines()
        parts.append(f"--- {f.name} (last {lines} of {len(text)} lines)\n" + "\n".join(text[-lines:]))
    return "\n".join(parts)


def served_model(endpoint: str) -> str:
    r = httpx.get(endpoint + "/models", timeout=30)
    r.raise_for_status()
    return r.json()["data"][0]["id"]


def bench_config(cfg: Any, endpoint: str, concurrency: int, max_tokens: int) -> dict[str, Any]:
    """`ocrserve bench` (pipeline, plain, ceiling, stages: the modes the config names) against one server:
    the same synthetic pages for each mode, so the ratios are taken side by side."""
    from ocrserve.bench.runner import run_bench

    return run_bench(
        server=endpoint,
        synthetic=cfg.bench_pages,
        modes=list(cfg.bench_modes),
        model=cfg.profile,
        concurrency=concurrency,
        max_tokens=max_tokens,
        stream_probe=5,
        stage_pages=cfg.stage_pages,
        plain_pages=cfg.plain_pages,
        command=f"ocrserve bench --server {endpoint} --synthetic {cfg.bench_pages} --modes "
        f"{','.join(cfg.bench_modes)} --concurrency {concurrency} --max-tokens {max_tokens} "
        f"--model {cfg.profile} --stage-pages {cfg.stage_pages}"
        + (f" --plain-pages {cfg.plain_pages}" if cfg.plain_pages else "")
        + " (run by the sweep)",
    )
