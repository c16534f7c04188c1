"""Runs the processes of a layout: attach or spawn, wait for health, restart the dead, stop them all.

- Attach: a port where a healthy vLLM already answers (GET /health and GET /v1/models both 200) is
  used as it is, when it is what this layout would start there: its /v1/models card names the same
  served model (`id`), the same checkpoint (`root`, or a checkpoint of the same profile) and the same
  `max_model_len` as the command line (`attach_mismatch`); else the start fails with one line naming
  both. Nothing is spawned there and nothing is stopped there on exit.
- Spawn: each child runs in its own process group (vLLM forks an engine core and workers), with
  its output in `<log_dir>/<name>.log`; while starting, a child that exits or misses the health
  deadline fails the start with the reason read from its log tail (out of memory, no GPU, model not
  found, offline, port in use, ...).
- Watch: once all are healthy, a child that dies is restarted after a backoff (doubling), at most
  `max_restarts` times in a row (the count resets once a restarted child stays up `stable_s`).
- Front: the EPD proxy or the router (one URL over the replicas) starts once the vLLM servers are
  healthy, and is restarted like them; the router itself takes a dead replica out of its rotation
  and puts it back once its restart is healthy.
- Stop: SIGTERM to every child's process group, SIGKILL after the grace period, then reaped: no
  orphan keeps a GPU.
"""

from __future__ import annotations

import logging
import os
import re
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from ocrserve.errors import OcrserveError
from ocrserve.vllm.attach import attach_mismatch, expected_card
from ocrserve.vllm.launch import Layout, ProcessSpec

log = logging.getLogger(__name__)

FRONTS = ("proxy", "router")  # the processes in front of the vLLM servers: started once those are healthy

# (reason, patterns) in order: the first that matches the log tail names the failure
DIAGNOSES: list[tuple[str, list[str]]] = [
    (
        "out of GPU memory",
        [
            r"CUDA out of memory",
            r"OutOfMemoryError",
            r"CUDA error: out of memory",
            r"larger than the available KV cache memory",
            r"No available memory for the cache blocks",
            r"Insufficient memory",
            r"not enough memory",
        ],
    ),
    (
        "no usable GPU (CUDA not available)",
        [
            r"No CUDA GPUs are available",
            r"Found no NVIDIA driver",
            r"CUDA driver initialization failed",
            r"Failed to infer device type",
            r"NVIDIA-SMI has failed",
            r"libcuda\.so.*cannot open",
            r"CUDA is not available",
            r"no CUDA-capable device",
        ],
    ),
    (
        "offline: the model is not in the local Hugging Face cache and HF_HUB_OFFLINE forbids downloading",
        [
            r"OfflineModeIsEnabled",
            r"outgoing traffic has been disabled",
            r"HF_HUB_OFFLINE",
            r"couldn't connect to 'https://huggingface\.co'",
            r"LocalEntryNotFoundError",
            r"Cannot find the requested files in the (disk )?cache",
        ],
    ),
    (
        "model not found (no such local folder or Hugging Face repository)",
        [
            r"RepositoryNotFoundError",
            r"Repository Not Found",
            r"is not a local folder and is not a valid model identifier",
            r"Invalid repository ID",
            r"does not appear to have a file named config\.json",
            r"404 Client Error",
            r"No such file or directory: '.*config\.json'",
        ],
    ),
    ("access denied to a gated model (set HF_TOKEN)", [r"gated repo", r"401 Client Error", r"403 Client Error"]),
    ("port in use", [r"Address already in use", r"\[Errno 98\]"]),
    ("vLLM rejected a flag", [r"unrecognized arguments", r"error: argument", r"vllm: error:"]),
]


def diagnose(log_text: str) -> str | None:
    """The reason a vLLM server failed, read from its log, or None when the log does not say."""
    for reason, patterns in DIAGNOSES:
        if any(re.search(p, log_text, re.IGNORECASE) for p in patterns):
            return reason
    return None


class ServeError(OcrserveError, RuntimeError):
    """A replica could not be started or kept running; the message names it, the reason and the log."""

    def __init__(self, name: str, reason: str, log_path: Path | None = None, tail: str = "") -> None:
        self.name, self.reason, self.log_path, self.tail = name, reason, log_path, tail
        where = f" (log: {log_path})" if log_path else ""
        last = "\n".join(tail.strip().splitlines()[-15:])
        super().__init__(f"{name}: {reason}{where}" + (f"\n--- last lines of its log ---\n{last}" if last else ""))


def probe(url: str, timeout: float = 2.0) -> bool:
    """True when a vLLM-like server answers at url: /health and /v1/models both 200."""
    try:
        with httpx.Client(timeout=timeout) as c:
            return c.get(f"{url}/health").status_code == 200 and c.get(f"{url}/v1/models").status_code == 200
    except httpx.HTTPError:
        return False


def port_taken(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(0.5)
        return s.connect_ex((host, port)) == 0


def _tail(path: Path, nbytes: int = 64_000) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - nbytes))
            return f.read().decode("utf-8", "replace")
    except OSError:
        return ""


@dataclass
class Child:
    spec: ProcessSpec
    log_path: Path
    attached: bool = False
    proc: subprocess.Popen | None = None
    state: str = "new"  # new, starting, healthy, backoff, failed, attached, stopped
    deadline: float = 0.0
    restart_at: float = 0.0
    restarts: int = 0  # in a row: reset once a restarted child stays healthy for stable_s
    healthy_since: float = 0.0
    total_restarts: int = 0
    pids: list[int] = field(default_factory=list)


class Supervisor:
    """Owns the children of one `ocrserve serve`."""

    def __init__(
        self,
        layout: Layout,
        log_dir: Path,
        *,
        health_timeout: float = 900.0,
        max_restarts: int = 3,
        backoff_s: float = 2.0,
        max_backoff_s: float = 60.0,
        grace_s: float = 15.0,
        poll_s: float = 0.5,
        stable_s: float = 120.0,
        env: dict[str, str] | None = None,
        before_spawn: Callable[[ProcessSpec], None] | None = None,
    ) -> None:
        self.layout = layout
        self.before_spawn = before_spawn  # a check before a process is started (not when one is attached)
        self.log_dir = Path(log_dir)
        self.health_timeout = health_timeout
        self.max_restarts = max_restarts
        self.backoff_s = backoff_s
        self.max_backoff_s = max_backoff_s
        self.grace_s = grace_s
        self.poll_s = poll_s
        self.stable_s = stable_s
        self.env = env
        self.children = [Child(spec=s, log_path=self.log_dir / f"{s.name}.log") for s in layout.processes]
        self.stop_event = threading.Event()
        self._lock = threading.Lock()

    # ---------------------------------------------------------------------------------- start
    def _spawn(self, child: Child) -> None:
        self.log_dir.mkdir(parents=True, exist_ok=True)
        env = {**(self.env if self.env is not None else os.environ), **child.spec.env}
        logf = open(child.log_path, "ab")
        try:
            logf.write(f"\n=== ocrserve: starting {child.spec.name}: {child.spec.shell()}\n".encode())
            logf.flush()
            child.proc = subprocess.Popen(
                child.spec.argv,
                env=env,
                stdout=logf,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        except OSError as e:
            raise ServeError(child.spec.name, f"cannot run {child.spec.argv[0]!r}: {e}", child.log_path) from e
        finally:
            logf.close()
        child.pids.append(child.proc.pid)
        child.state = "starting"
        child.deadline = time.monotonic() + self.health_timeout
        log.info("started %s (pid %d): %s", child.spec.name, child.proc.pid, child.spec.shell())

    def _attach_or_spawn(self, child: Child) -> None:
        s = child.spec
        if probe(s.url):
            # a front (router, proxy) lists the model of the vLLM servers behind it
            server = next((c.spec for c in self.children if c.spec.role not in FRONTS), s) if s.role in FRONTS else s
            want = expected_card(server)
            why = attach_mismatch(s.url, want) if want is not None else None
            if why is not None:
                raise ServeError(
                    s.name,
                    f"a server already answers at {s.url}, but not the one this command starts: {why} "
                    f"(stop it or pick another --port)",
                )
            child.attached, child.state = True, "attached"
            log.info("%s: the same server already answers at %s; attaching", s.name, s.url)
            return
        if port_taken(s.host, s.port):
            raise ServeError(
                s.name,
                f"port in use: {s.host}:{s.port} answers but is no healthy vLLM server "
                f"(pick another --port or stop what runs there)",
            )
        if self.before_spawn is not None:
            self.before_spawn(s)
        self._spawn(child)

    def start(self) -> None:
        """Attach or spawn every process and wait until all are healthy; ServeError on any failure."""
        try:
            # vLLM servers start together (each takes minutes); the EPD proxy or the router once they answer
            first = [c for c in self.children if c.spec.role not in FRONTS]
            later = [c for c in self.children if c.spec.role in FRONTS]
            for group in (first, later):
                for c in group:
                    self._attach_or_spawn(c)
                self._wait_healthy(group)
        except BaseException:
            self.stop()
            raise

    def _failure(self, child: Child, default: str) -> ServeError:
        tail = _tail(child.log_path)
        return ServeError(child.spec.name, diagnose(tail) or default, child.log_path, tail)

    def _wait_healthy(self, group: list[Child]) -> None:
        while True:
            pending = [c for c in group if c.state == "starting"]
            if not pending:
                return
            for c in pending:
                rc = c.proc.poll() if c.proc else None
                if rc is not None:
                    raise self._failure(c, f"exited with code {rc} before it was healthy")
                if probe(c.spec.url, timeout=1.0):
                    c.state, c.healthy_since = "healthy", time.monotonic()
                    log.info("%s healthy at %s", c.spec.name, c.spec.url)
                elif time.monotonic() > c.deadline:
                    raise self._failure(c, f"not healthy after {self.health_timeout:.0f} s")
            if self.stop_event.wait(self.poll_s):
                raise KeyboardInterrupt("stopped while starting")

    # ---------------------------------------------------------------------------------- watch
    def check(self) -> None:
        """One supervision step: restart the dead (with backoff), notice restarted ones getting healthy."""
        now = time.monotonic()
        for c in self.children:
            if c.attached or c.state in ("failed", "stopped"):
                continue
            if c.state == "backoff":
                if now >= c.restart_at:
                    self._spawn(c)
                continue
            rc = c.proc.poll() if c.proc else None
            if c.state == "healthy" and c.restarts and now - c.healthy_since > self.stable_s:
                c.restarts = 0  # stayed up: a later death starts a fresh count
            if c.state == "starting" and rc is None:
                if probe(c.spec.url, timeout=1.0):
                    c.state, c.healthy_since = "healthy", now
                    log.warning("%s healthy again after a restart", c.spec.name)
                    continue
                if now <= c.deadline:
                    continue
                log.warning("%s not healthy after %.0f s; killing it", c.spec.name, self.health_timeout)
                self._kill(c)
                rc = c.proc.poll() if c.proc else -9
            if rc is None:
                continue
            self._kill(c)  # its engine core / workers may outlive it and hold the GPU
            err = self._failure(c, f"exited with code {rc}")
            if c.restarts >= self.max_restarts:
                c.state = "failed"
                raise ServeError(
                    c.spec.name, f"died {c.restarts + 1} times in a row, giving up: {err.reason}", c.log_path, err.tail
                )
            delay = min(self.max_backoff_s, self.backoff_s * (2**c.restarts))
            c.restarts += 1
            c.total_restarts += 1
            c.state, c.restart_at = "backoff", now + delay
            log.warning(
                "%s died (%s); restart %d/%d in %.1f s", c.spec.name, err.reason, c.restarts, self.max_restarts, delay
            )

    def run(self) -> None:
        """Watch until stop_event is set (signal, Ctrl-C) or a replica keeps dying; always stops children."""
        try:
            while not self.stop_event.wait(self.poll_s):
                self.check()
        finally:
            self.stop()

    def install_signal_handlers(self) -> None:
        """SIGINT/SIGTERM set stop_event (main thread only)."""

        def _handler(signum, frame):
            log.warning("signal %d: stopping", signum)
            self.stop_event.set()

        signal.signal(signal.SIGINT, _handler)
        signal.signal(signal.SIGTERM, _handler)

    # ---------------------------------------------------------------------------------- stop
    def _kill(self, c: Child) -> None:
        p = c.proc
        if p is None:
            return
        pgid = p.pid  # start_new_session: the child leads its own group
        try:
            os.killpg(pgid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        try:
            p.wait(timeout=self.grace_s)
        except subprocess.TimeoutExpired:
            log.warning("%s did not stop within %.0f s; SIGKILL", c.spec.name, self.grace_s)
        # the group may outlive its leader (engine core, workers): SIGKILL whatever is left
        try:
            os.killpg(pgid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        try:
            p.wait(timeout=5)
        except subprocess.TimeoutExpired:
            log.error("%s (pid %d) survived SIGKILL", c.spec.name, p.pid)

    def stop(self) -> None:
        """Stop every spawned child (SIGTERM to its group, SIGKILL after the grace period). Idempotent."""
        with self._lock:
            live = [(c, c.proc) for c in self.children if c.proc is not None and c.state != "stopped"]
            for _, proc in live:  # SIGTERM all first so they shut down in parallel
                try:
                    os.killpg(proc.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
            for c, _ in live:
                self._kill(c)
                c.state = "stopped"

    @property
    def urls(self) -> list[str]:
        return list(self.layout.endpoints)
