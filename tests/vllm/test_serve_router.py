"""`ocrserve serve` on two "GPUs" end to end on the CPU: stand-in vLLM replicas (tests/fakes/standin_vllm.py)
behind the router on the one port asked for; a replica killed is routed around, restarted by the
supervisor and back in the router's rotation; SIGTERM stops everything."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import httpx
import psutil

from tests.support.api import free_port
from tests.support.replicas import body, concurrently, png, serve_argv, wait_until

ROOT = Path(__file__).resolve().parents[2]


def free_ports(n: int) -> int:
    """A port p with p..p+n-1 all free."""
    for _ in range(50):
        p = free_port()
        try:
            for q in range(p, p + n):
                with socket.socket() as s:
                    s.bind(("127.0.0.1", q))
            return p
        except OSError:
            continue
    raise RuntimeError("no run of free ports")


def replica_pid(port: int) -> int | None:
    for p in psutil.process_iter(["cmdline"]):
        cmd = p.info["cmdline"] or []
        if "tests.fakes.standin_vllm" in cmd and str(port) in cmd:
            return p.pid
    return None


def stats(port: int) -> dict | None:
    try:
        return httpx.get(f"http://127.0.0.1:{port}/_stats", timeout=5).json()
    except httpx.HTTPError:
        return None


def test_serve_on_two_gpus_is_one_url_that_survives_a_replica(tmp_path: Path):
    port = free_ports(3)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OCRSERVE_VLLM_BIN": f"{sys.executable} -m tests.fakes.standin_vllm"}
    cmd = serve_argv(tmp_path / "logs", "--port", str(port), gpus="0,1")
    p = subprocess.Popen(cmd, env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    url = f"http://127.0.0.1:{port}/v1"
    try:
        lines = []
        for line in p.stdout:
            lines.append(line)
            if line.startswith("ready"):
                break
        out = "".join(lines)
        assert f"ready: {url}" in out and f"endpoints: {url}\n" in out, out
        assert "[router]" in out and f"--port {port + 1}" in out and f"--port {port + 2}" in out

        # pages spread over both replicas through the one URL
        answers = concurrently(
            lambda i: httpx.post(url + "/chat/completions", json=body(png(i)), timeout=60), list(range(8))
        )
        assert all(a.status_code == 200 for a in answers), answers
        # least outstanding requests: 4 and 4 when all 8 are in flight at once, 5 and 3 when one was answered
        # before the last came (a loaded machine); never all on one
        first = [stats(port + 1 + i)["total_requests"] for i in (0, 1)]
        assert sum(first) == 8 and min(first) >= 3, first

        # replica-0 dies: its pages go to replica-1, the supervisor restarts it, the router takes it back
        pid = replica_pid(port + 1)
        assert pid is not None
        os.kill(pid, signal.SIGKILL)
        for i in range(4):
            assert httpx.post(url + "/chat/completions", json=body(png(50 + i)), timeout=60).status_code == 200
        assert stats(port + 2)["total_requests"] == first[1] + 4
        assert wait_until(lambda: replica_pid(port + 1) not in (None, pid) and stats(port + 1) is not None, 30)
        router = f"http://127.0.0.1:{port}/router/replicas"
        assert wait_until(lambda: httpx.get(router, timeout=5).json()["healthy"] == 2, 10)
        for i in range(4):
            assert httpx.post(url + "/chat/completions", json=body(png(90 + i)), timeout=60).status_code == 200
        assert stats(port + 1)["total_requests"] == 2 and stats(port + 2)["total_requests"] == first[1] + 6

        p.send_signal(signal.SIGTERM)
        assert p.wait(timeout=30) == 0
        assert wait_until(lambda: replica_pid(port + 1) is None and replica_pid(port + 2) is None, 10)
        assert not wait_until(lambda: stats(port) is not None or _answers(port), 1)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        for q in (port + 1, port + 2):
            if (pid := replica_pid(q)) is not None:
                os.kill(pid, signal.SIGKILL)


def _answers(port: int) -> bool:
    try:
        httpx.get(f"http://127.0.0.1:{port}/health", timeout=1)
        return True
    except httpx.HTTPError:
        return False


def test_dry_run_on_four_gpus_prints_one_endpoint(tmp_path: Path):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    r = subprocess.run(
        [sys.executable, "-m", "ocrserve.cli", "serve", "--dry-run", "--gpus", "0,1,2,3", "--gpu-memory-gib", "139.8"],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    assert "endpoints: http://127.0.0.1:8000/v1\n" in r.stdout
    assert "[router]" in r.stdout and "--replicas http://127.0.0.1:8001,http://127.0.0.1:8002," in r.stdout
    assert [f"--port {8001 + i} " in r.stdout for i in range(4)] == [True] * 4
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "ocrserve.cli",
            "serve",
            "--dry-run",
            "--gpus",
            "0,1",
            "--no-router",
            "--gpu-memory-gib",
            "139.8",
        ],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0 and "[router]" not in r.stdout
    assert "endpoints: http://127.0.0.1:8000/v1 http://127.0.0.1:8001/v1\n" in r.stdout
