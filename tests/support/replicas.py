"""Helpers of the serve and router tests (tests/vllm/): `ocrserve serve` command lines, chat requests for the stand-in, the router as a process,
requests sent at once, waiting for a condition."""

from __future__ import annotations

import base64
import io
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
from PIL import Image

from tests.fakes.standin import StandIn
from tests.support.api import free_port

ROOT = Path(__file__).resolve().parents[2]


def serve_argv(log_dir: Path, *args: str, gpus: str = "0") -> list[str]:
    """`ocrserve serve` of chandra-1 planned for 139.8 GiB cards (no nvidia-smi asked), its logs in log_dir."""
    argv = [sys.executable, "-m", "ocrserve.cli", "serve", "--model", "chandra-1", "--gpu-memory-gib", "139.8"]
    return [*argv, "--gpus", gpus, "--log-dir", str(log_dir), *args]


def png(i: int) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (64, 48), (i % 256, (i * 7) % 256, 200)).save(buf, format="PNG")
    return buf.getvalue()


def body(image: bytes, **extra) -> dict:
    url = "data:image/png;base64," + base64.b64encode(image).decode()
    return {
        "model": "chandra",
        "messages": [
            {
                "role": "user",
                "content": [{"type": "image_url", "image_url": {"url": url}}, {"type": "text", "text": "read"}],
            }
        ],
        **extra,
    }


def wait_until(cond, timeout: float = 20.0) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if cond():
            return True
        time.sleep(0.05)
    return cond()


class RouterProcess:
    """`python -m ocrserve.vllm.router` over the given replicas, health checked every 0.2 s."""

    def __init__(self, replicas: list[StandIn], log: Path) -> None:
        self.port = free_port()
        self.root = f"http://127.0.0.1:{self.port}"
        self.url = self.root + "/v1"
        self.log = log
        with open(log, "ab") as f:
            self.proc = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "ocrserve.vllm.router",
                    "--port",
                    str(self.port),
                    "--replicas",
                    ",".join(r.root for r in replicas),
                    "--health-interval",
                    "0.2",
                ],
                cwd=ROOT,
                stdout=f,
                stderr=subprocess.STDOUT,
            )
        assert wait_until(lambda: self.health() == 200), self.log.read_text()

    def health(self) -> int | None:
        try:
            return httpx.get(self.root + "/health", timeout=2).status_code
        except httpx.HTTPError:
            return None

    def replicas(self) -> list[dict]:
        return httpx.get(self.root + "/router/replicas", timeout=5).json()["replicas"]

    def post(self, payload: dict, timeout: float = 60) -> httpx.Response:
        return httpx.post(self.url + "/chat/completions", json=payload, timeout=timeout)

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def concurrently(fn, items: list) -> list:
    out: list = [None] * len(items)

    def run(i):
        try:
            out[i] = fn(items[i])
        except Exception as e:
            out[i] = e

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(items))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    return out
