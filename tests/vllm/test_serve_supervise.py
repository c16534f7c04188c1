"""Supervision of `ocrserve serve` with a stand-in vLLM process (tests/fake_vllm.py)."""

from __future__ import annotations

import os
import shlex
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from ocrserve.vllm.launch import Layout, ProcessSpec
from ocrserve.vllm.supervise import ServeError, Supervisor, diagnose, probe
from tests.support.replicas import serve_argv, wait_until

FAKE = Path(__file__).resolve().parents[1] / "fakes" / "fake_vllm.py"
ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def pids(pidfile: Path) -> list[int]:
    return [int(x) for x in pidfile.read_text().split()] if pidfile.exists() else []


def no_orphans(pidfile: Path) -> bool:
    """Every process the fake servers started is gone (SIGKILL lands asynchronously: allow 5 s)."""
    return wait_until(lambda: not [p for p in pids(pidfile) if alive(p)], 5.0)


@pytest.fixture
def fake(tmp_path: Path):
    """Builds a supervisor over N fake vLLM replicas with a given mode; stops it at the end."""
    sups: list[Supervisor] = []
    pidfile = tmp_path / "pids"

    def make(mode: str = "healthy", n: int = 1, **env_and_kw) -> Supervisor:
        kw = {
            k: env_and_kw.pop(k)
            for k in list(env_and_kw)
            if k in ("health_timeout", "max_restarts", "backoff_s", "grace_s")
        }
        env = {
            **os.environ,
            "FAKE_VLLM_MODE": mode,
            "FAKE_VLLM_PIDFILE": str(pidfile),
            "FAKE_VLLM_STATE": str(tmp_path / "starts"),
            **{k: str(v) for k, v in env_and_kw.items()},
        }
        procs = []
        for i in range(n):
            port = free_port()
            procs.append(
                ProcessSpec(
                    name=f"replica-{i}",
                    role="replica",
                    port=port,
                    argv=[
                        sys.executable,
                        str(FAKE),
                        "serve",
                        "m",
                        "--host",
                        "127.0.0.1",
                        "--port",
                        str(port),
                        "--served-model-name",
                        "chandra",
                    ],
                )
            )
        layout = Layout(parallel="dp", processes=procs, endpoints=[f"{p.url}/v1" for p in procs])
        sup = Supervisor(
            layout,
            tmp_path / "logs",
            poll_s=0.1,
            env=env,
            **{"health_timeout": 20.0, "backoff_s": 0.2, "grace_s": 3.0, **kw},
        )
        sups.append(sup)
        return sup

    make.pidfile = pidfile
    make.tmp = tmp_path
    yield make
    for s in sups:
        s.stop()


def test_healthy_late_then_stop_leaves_no_orphan(fake):
    sup = fake("healthy", n=2, FAKE_VLLM_DELAY=1.0)
    sup.start()
    assert all(c.state == "healthy" for c in sup.children)
    assert all(probe(c.spec.url) for c in sup.children)
    started = pids(fake.pidfile)
    assert len(started) == 4  # 2 servers + their "engine core" children
    assert all(alive(p) for p in started)
    sup.stop()
    assert no_orphans(fake.pidfile)
    assert not any(probe(c.spec.url, timeout=0.5) for c in sup.children)


def test_dead_replica_is_restarted(fake):
    sup = fake("die_once", FAKE_VLLM_DIE_AFTER=0.5)
    sup.start()
    first = pids(fake.pidfile)
    c = sup.children[0]

    def restarted_and_healthy() -> bool:
        sup.check()
        return c.total_restarts == 1 and c.state == "healthy"

    assert wait_until(restarted_and_healthy)
    assert (fake.tmp / "starts").read_text() == "2"
    assert probe(c.spec.url)
    # the dead replica's leftover engine core was killed before the restart
    assert wait_until(lambda: not [p for p in first if alive(p)], 5.0)
    assert "EngineCore died unexpectedly" in c.log_path.read_text()


def test_replica_that_keeps_dying_gives_up_with_reason(fake):
    sup = fake("die", FAKE_VLLM_DIE_AFTER=0.3, max_restarts=1)
    sup.start()
    with pytest.raises(ServeError, match="died 2 times in a row") as e:
        end = time.monotonic() + 20
        while time.monotonic() < end:
            sup.check()
            time.sleep(0.1)
    assert e.value.name == "replica-0"
    sup.stop()
    assert no_orphans(fake.pidfile)


@pytest.mark.parametrize(
    "mode,reason",
    [("oom", "out of GPU memory"), ("nogpu", "no usable GPU"), ("notfound", "model not found"), ("offline", "offline")],
)
def test_failed_start_names_the_reason(fake, mode, reason):
    sup = fake(mode)
    with pytest.raises(ServeError) as e:
        sup.start()
    assert e.value.reason.startswith(reason)
    assert reason in str(e.value) and str(sup.children[0].log_path) in str(e.value)
    if mode == "oom":
        assert "CUDA out of memory" in e.value.tail


def test_health_timeout_is_an_error_and_kills_the_child(fake):
    sup = fake("hang", health_timeout=1.0)
    with pytest.raises(ServeError, match="not healthy after 1 s"):
        sup.start()
    assert no_orphans(fake.pidfile)


def test_attach_to_healthy_server(fake):
    port = free_port()
    env = {**os.environ, "FAKE_VLLM_MODE": "healthy"}
    ext = subprocess.Popen(  # the server the supervisor's command line would start (fake(): model m, chandra)
        [sys.executable, str(FAKE), "serve", "m", "--port", str(port), "--served-model-name", "chandra"],
        env=env,
        stdout=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        assert wait_until(lambda: probe(f"http://127.0.0.1:{port}"), 15)
        sup = fake("oom")  # would fail if it spawned
        sup.children[0].spec.port = port
        sup.start()
        c = sup.children[0]
        assert c.attached and c.proc is None and c.state == "attached"
        sup.stop()
        assert ext.poll() is None and probe(f"http://127.0.0.1:{port}")  # not ours to stop
    finally:
        os.killpg(ext.pid, signal.SIGKILL)
        ext.wait()


def test_port_taken_by_something_else(fake):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        sup = fake("healthy")
        sup.children[0].spec.port = s.getsockname()[1]
        with pytest.raises(ServeError, match="port in use"):
            sup.start()
    assert pids(fake.pidfile) == []


def test_diagnose_vllm_messages():
    assert diagnose("OSError: [Errno 98] Address already in use") == "port in use"
    assert diagnose(
        "ValueError: ... (13.5 GiB KV cache is needed, which is larger than the available KV cache memory (1.2 GiB)"
    ).startswith("out of GPU memory")
    assert diagnose("vllm: error: unrecognized arguments: --bogus") == "vLLM rejected a flag"
    assert diagnose("INFO all good") is None


def _start_serve(tmp_path: Path, pidfile: Path, delay: str, extra_env: dict, *args: str) -> subprocess.Popen:
    """`ocrserve serve` for one GPU over the fake vllm (healthy after `delay` seconds)."""
    env = {
        **os.environ,
        "FAKE_VLLM_MODE": "healthy",
        "FAKE_VLLM_DELAY": delay,
        "FAKE_VLLM_PIDFILE": str(pidfile),
        "OCRSERVE_VLLM_BIN": f"{sys.executable} {FAKE}",
        **extra_env,
    }
    cmd = serve_argv(tmp_path / "logs", *args)
    return subprocess.Popen(cmd, env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def _until_ready(p: subprocess.Popen) -> str:
    """What serve printed up to its `ready` line (or until it exited)."""
    lines = []
    for line in p.stdout:
        lines.append(line)
        if line.startswith("ready"):
            break
    return "".join(lines)


def test_cli_serve_sigterm_stops_everything(tmp_path: Path):
    """`ocrserve serve` end to end with the fake vllm: ready, then SIGTERM -> exits, no process left."""
    port = free_port()
    pidfile = tmp_path / "pids"
    p = _start_serve(tmp_path, pidfile, "0.5", {}, "--port", str(port), "--", "--enforce-eager")
    try:
        out = _until_ready(p)
        assert "ready" in out, out
        assert "--kv-cache-memory-bytes" in out and "--enforce-eager" in out
        assert probe(f"http://127.0.0.1:{port}")
        started = pids(pidfile)
        assert len(started) == 2
        p.send_signal(signal.SIGTERM)
        assert p.wait(timeout=20) == 0
        assert no_orphans(pidfile)
        log = (tmp_path / "logs" / "replica-0.log").read_text()
        assert "--enforce-eager" in log  # the passthrough flag reached "vllm"
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()


def test_cli_serve_with_the_ocr_api_in_front(tmp_path: Path):
    """`ocrserve serve --api-port`: the OCR API comes up over the replica and reports it reachable."""
    import httpx

    port, api_port = free_port(), free_port()
    pidfile = tmp_path / "pids"
    p = _start_serve(
        tmp_path,
        pidfile,
        "0.2",
        {"OCRSERVE_DATA_DIR": str(tmp_path / "data")},
        "--port",
        str(port),
        "--api-port",
        str(api_port),
    )
    try:
        out = _until_ready(p)
        assert "ready" in out, out
        deadline = time.monotonic() + 60
        health = ready = None
        while time.monotonic() < deadline:
            try:
                health = httpx.get(f"http://127.0.0.1:{api_port}/healthz", timeout=2).status_code
                ready = httpx.get(f"http://127.0.0.1:{api_port}/readyz", timeout=5).status_code
                if health == 200 and ready == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.3)
        assert (health, ready) == (200, 200)
        p.send_signal(signal.SIGTERM)
        assert p.wait(timeout=30) == 0
        assert no_orphans(pidfile)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()


def _without_vllm(tmp_path: Path) -> dict[str, str]:
    """An environment where no `vllm` executable can be found (PATH holds nothing) and none is configured."""
    (tmp_path / "empty-bin").mkdir(exist_ok=True)
    env = {k: v for k, v in os.environ.items() if k != "OCRSERVE_VLLM_BIN"}
    return {**env, "PATH": str(tmp_path / "empty-bin"), "PYTHONPATH": str(ROOT)}


def _serve(tmp_path: Path, env: dict, *args: str) -> subprocess.CompletedProcess:
    """`ocrserve serve *args` (logs under tmp_path), run to its end."""
    argv = serve_argv(tmp_path / "logs", *args)
    return subprocess.run(argv, env=env, cwd=ROOT, capture_output=True, text=True, timeout=120)


def test_cli_serve_without_vllm_is_the_extras_hint_and_exit_2(tmp_path: Path):
    """vLLM to start and no `vllm` to start: one line naming the [vllm] extra (as the other commands'
    hints do), exit 2; nothing is left listening. --dry-run needs no vLLM."""
    port = free_port()
    env = _without_vllm(tmp_path)
    r = _serve(tmp_path, env, "--port", str(port))
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert r.stderr.strip().splitlines() == [
        "error: ocrserve serve needs the [vllm] extra (vllm is not installed): "
        "pip install '.[vllm]' (in a clone of ocrserve; it is not on PyPI)"
    ], r.stderr
    assert not probe(f"http://127.0.0.1:{port}")
    r = _serve(tmp_path, env, "--port", str(port), "--dry-run")
    assert r.returncode == 0 and "vllm serve" in r.stdout and not r.stderr.strip(), (r.stdout, r.stderr)


def _planned_vllm_args(tmp_path: Path, env: dict, port: int) -> list[str]:
    """`serve ...` as `ocrserve serve --port port` would run vLLM (from its --dry-run)."""
    r = _serve(tmp_path, env, "--port", str(port), "--dry-run")
    line = next(x for x in r.stdout.splitlines() if x.strip().startswith("[replica-0]"))
    argv = shlex.split(line.split("]", 1)[1])
    return argv[argv.index("serve") :]


@pytest.mark.parametrize("how", ["attach", "vllm-bin"])
def test_cli_serve_without_vllm_attaches_or_runs_the_given_executable(tmp_path: Path, how: str):
    """No `vllm` to be found: a healthy server already on the port is attached to, and --vllm-bin
    pointing to an executable is run; both become ready and stop cleanly on SIGTERM."""
    port = free_port()
    pidfile = tmp_path / "pids"
    env = _without_vllm(tmp_path)
    fake_env = {**env, "FAKE_VLLM_MODE": "healthy", "FAKE_VLLM_PIDFILE": str(pidfile)}
    ext = None
    args = ["--port", str(port)]
    if how == "attach":
        ext = subprocess.Popen(  # what `serve` would start there: its dry run's command line (same model and flags)
            [sys.executable, str(FAKE), *_planned_vllm_args(tmp_path, env, port)],
            env=fake_env,
            stdout=subprocess.DEVNULL,
            start_new_session=True,
        )
        assert wait_until(lambda: probe(f"http://127.0.0.1:{port}"), 15)
    else:
        args += ["--vllm-bin", f"{sys.executable} {FAKE}"]
    p = subprocess.Popen(
        serve_argv(tmp_path / "logs", *args),
        env=fake_env if how == "vllm-bin" else env,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        out = _until_ready(p)
        assert out.splitlines()[-1].startswith("ready" + (" (attached to running replica-0)" if ext else ":")), out
        p.send_signal(signal.SIGTERM)
        assert p.wait(timeout=20) == 0
        if ext is not None:
            assert ext.poll() is None and probe(f"http://127.0.0.1:{port}")  # not ours to stop
        else:
            assert no_orphans(pidfile)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        if ext is not None:
            os.killpg(ext.pid, signal.SIGKILL)
            ext.wait()


def test_cli_serve_dry_run_shows_the_renderer_threads(tmp_path: Path):
    """`ocrserve serve` starts vLLM with 8 API renderer threads; --renderer-workers 0 leaves vLLM's default."""
    env = _without_vllm(tmp_path)
    r = _serve(tmp_path, env, "--dry-run")
    assert r.returncode == 0 and "--renderer-num-workers 8" in r.stdout, (r.stdout, r.stderr)
    r = _serve(tmp_path, env, "--dry-run", "--renderer-workers", "0")
    assert r.returncode == 0 and "vllm serve" in r.stdout and "--renderer-num-workers" not in r.stdout, r.stdout
