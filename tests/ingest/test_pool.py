"""The render pool: survives a crashed worker, and its workers never outlive their parent."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from ocrserve.ingest.pool import ResilientPool, WorkerCrash

ROOT = Path(__file__).resolve().parents[2]


def _square(x: int) -> int:
    return x * x


def _crash_on(x: int, marker: str) -> int:
    if x == 3:
        os._exit(1)  # a segfaulting pdfium would look like this to the pool
    return x


async def test_crashed_worker_fails_only_its_task():
    pool = ResilientPool(2)
    try:
        results = await asyncio.gather(*(pool.run(_crash_on, i, "") for i in range(6)), return_exceptions=True)
    finally:
        pool.shutdown()
    assert isinstance(results[3], WorkerCrash)
    assert [r for i, r in enumerate(results) if i != 3 and not isinstance(r, Exception)] == [0, 1, 2, 4, 5]
    assert "crashed" in str(results[3])


async def test_kwargs_and_reuse():
    pool = ResilientPool(1)
    try:
        assert await pool.run(_square, x=7) == 49
        assert await pool.run(_square, 3) == 9
    finally:
        pool.shutdown()


CHILD = """
import asyncio, os, sys, time
sys.path.insert(0, {root!r})
from ocrserve.ingest.pool import ResilientPool
async def main():
    pool = ResilientPool(2)
    await asyncio.gather(*(pool.run(time.sleep, 0.01) for _ in range(4)))
    print(" ".join(str(p) for p in pool._pool._processes), flush=True)
    time.sleep(60)
asyncio.run(main())
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux-only")
def test_workers_die_with_a_killed_parent():
    p = subprocess.Popen([sys.executable, "-c", CHILD.format(root=str(ROOT))], stdout=subprocess.PIPE, text=True)
    try:
        pids = [int(x) for x in p.stdout.readline().split()]
        assert len(pids) == 2 and all(psutil.pid_exists(x) for x in pids)
        p.send_signal(signal.SIGKILL)
        p.wait(timeout=10)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and any(
            psutil.pid_exists(x) and psutil.Process(x).status() != psutil.STATUS_ZOMBIE for x in pids
        ):
            time.sleep(0.1)
        alive = [x for x in pids if psutil.pid_exists(x) and psutil.Process(x).status() != psutil.STATUS_ZOMBIE]
        assert alive == []
    finally:
        if p.poll() is None:
            p.kill()


def _crash_if_marked(x: int) -> int:
    if x == 3:
        os._exit(1)
    time.sleep(0.05)
    return x


async def test_a_crash_never_fails_innocent_tasks_in_flight():
    """Every task in flight when the pool breaks is retried alone: only the crashing one fails."""
    pool = ResilientPool(2)
    try:
        results = await asyncio.gather(*(pool.run(_crash_if_marked, i) for i in range(12)), return_exceptions=True)
    finally:
        pool.shutdown()
    assert [i for i, r in enumerate(results) if isinstance(r, Exception)] == [3]
    assert [r for r in results if not isinstance(r, Exception)] == [i for i in range(12) if i != 3]


def test_start_method_avoids_fork_where_ray_runs(monkeypatch):
    """fork by default on Linux, spawn in a process where Ray is initialized (its threads make fork hang)."""
    import types

    from ocrserve.ingest import pool as poolmod

    monkeypatch.delenv("OCRSERVE_MP_START", raising=False)
    monkeypatch.setitem(sys.modules, "ray", types.SimpleNamespace(is_initialized=lambda: False))
    assert poolmod.default_start_method() == (
        "fork" if sys.platform.startswith("linux") else poolmod.mp.get_start_method()
    )
    monkeypatch.setitem(sys.modules, "ray", types.SimpleNamespace(is_initialized=lambda: True))
    if sys.platform.startswith("linux"):
        assert poolmod.default_start_method() == "spawn"
    monkeypatch.setenv("OCRSERVE_MP_START", "forkserver")
    assert poolmod.default_start_method() == "forkserver"


def _hang_on(x: int, pidfile: str) -> int:
    if x == 2:
        Path(pidfile).write_text(str(os.getpid()))
        time.sleep(3600)  # a PDF pdfium loops on
    time.sleep(0.2)
    return x


async def test_a_stuck_task_times_out_alone_and_the_pool_goes_on(tmp_path):
    """A task past the timeout is killed and retried alone; stuck again, it fails with WorkerTimeout. The
    tasks that were running beside it are retried and succeed, and the pool works afterwards."""
    from ocrserve.ingest.pool import WorkerTimeout

    pidfile = str(tmp_path / "stuck.pid")
    pool = ResilientPool(2, task_timeout=2.0)
    try:
        t0 = time.monotonic()
        results = await asyncio.gather(*(pool.run(_hang_on, i, pidfile) for i in range(6)), return_exceptions=True)
        elapsed = time.monotonic() - t0
        assert isinstance(results[2], WorkerTimeout) and "timed out after 2 s (twice)" in str(results[2])
        assert [r for i, r in enumerate(results) if i != 2] == [0, 1, 3, 4, 5]
        assert elapsed < 60  # not the hour the task would sleep
        assert await pool.run(_square, 5) == 25
    finally:
        pool.shutdown()
    stuck = int(Path(pidfile).read_text())
    deadline = time.monotonic() + 10
    while True:
        try:
            if psutil.Process(stuck).status() == psutil.STATUS_ZOMBIE:
                break
        except psutil.NoSuchProcess:
            break
        assert time.monotonic() < deadline, "the stuck worker is still running"
        time.sleep(0.1)


def _nap(x: int, stuck: tuple = ()) -> int:
    time.sleep(3600 if x in stuck else 0.3)
    return x


def _own_timeout(x: int) -> int:
    raise TimeoutError(f"the task's own timeout {x}")


async def test_tasks_queued_behind_a_stuck_one_are_not_lost():
    """Tasks still waiting when the pool is killed are retried, never cancelled under their callers."""
    from ocrserve.ingest.pool import WorkerTimeout

    pool = ResilientPool(2, task_timeout=1.5)
    try:

        async def later(i: int):
            await asyncio.sleep(0.2 * i)
            return await pool.run(_nap, i, (1, 2))

        results = await asyncio.gather(*(later(i) for i in range(10)), return_exceptions=True)
    finally:
        pool.shutdown()
    assert [i for i, r in enumerate(results) if isinstance(r, WorkerTimeout)] == [1, 2]
    assert [r for i, r in enumerate(results) if i not in (1, 2)] == [0, 3, 4, 5, 6, 7, 8, 9]


async def test_waiting_for_a_worker_is_not_counted_as_stuck():
    """Many more tasks than workers, each well under the timeout: nothing is killed, however long the
    queue; a task's own TimeoutError is its error, not a stuck worker."""
    pool = ResilientPool(2, task_timeout=1.5)
    try:
        assert await asyncio.gather(*(pool.run(_nap, i) for i in range(16))) == list(range(16))  # ~2.4 s of work
        with pytest.raises(TimeoutError, match="the task's own timeout 3"):
            await pool.run(_own_timeout, 3)
        assert pool._generation == 0  # the pool was never rebuilt
    finally:
        pool.shutdown()


def test_timeout_setting(monkeypatch):
    from ocrserve.ingest.pool import default_task_timeout

    monkeypatch.setenv("OCRSERVE_RENDER_TIMEOUT_S", "7.5")
    assert default_task_timeout() == 7.5 and ResilientPool(1).task_timeout == 7.5
    monkeypatch.setenv("OCRSERVE_RENDER_TIMEOUT_S", "0")
    assert default_task_timeout() is None
    monkeypatch.delenv("OCRSERVE_RENDER_TIMEOUT_S")
    assert default_task_timeout() == 120.0


async def test_a_worker_that_died_idle_does_not_break_the_pool():
    pool = ResilientPool(1, task_timeout=30)
    try:
        worker = await pool.run(os.getpid)
        os.kill(worker, signal.SIGKILL)  # the OOM killer, say
        time.sleep(0.5)
        assert await pool.run(_square, 4) == 16  # retried alone, the pool rebuilt
        assert await pool.run(os.getpid) not in (worker, os.getpid())
    finally:
        pool.shutdown()


def _mark_when_done(path: str, seconds: float) -> str:
    time.sleep(seconds)
    Path(path).write_text("done")
    return "ok"


def _was_marked(path: str) -> bool:
    return Path(path).exists()


async def test_a_cancelled_callers_task_keeps_its_worker_until_it_ends(tmp_path):
    """The next task waits for the worker the cancelled one still occupies (it is not queued behind it
    with its clock running)."""
    marker = str(tmp_path / "first.done")
    pool = ResilientPool(1, task_timeout=3.0)
    try:
        first = asyncio.ensure_future(pool.run(_mark_when_done, marker, 1.5))
        await asyncio.sleep(0.3)
        first.cancel()
        assert await pool.run(_was_marked, marker) is True  # ran after the first one ended
        assert pool._generation == 0  # no kill, no rebuild
    finally:
        pool.shutdown()


def _hang_writing_pid(pidfile: str, crash_marker: str = "") -> None:
    if crash_marker and not Path(crash_marker).exists():
        Path(crash_marker).write_text("crashed once")
        os._exit(1)  # the first attempt crashes: the retry runs alone
    Path(pidfile).write_text(str(os.getpid()))
    time.sleep(3600)


async def _started(pidfile: Path, seconds: float = 30) -> None:
    """Wait until the task wrote its pid (it runs in a worker now)."""
    deadline = time.monotonic() + seconds
    while not pidfile.exists():
        assert time.monotonic() < deadline, "the task never started"
        await asyncio.sleep(0.1)


async def _wait_gone(pid: int, seconds: float = 15) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        await asyncio.sleep(0.1)  # the event loop runs on: the pool's watchdog is a loop timer
    return False


@pytest.mark.parametrize("where", ["pool", "lone retry"])
async def test_a_cancelled_stuck_task_is_still_stopped(tmp_path, where):
    pidfile = tmp_path / "pid"
    pool = ResilientPool(1, task_timeout=1.5)
    try:
        args = (str(pidfile), str(tmp_path / "crash")) if where == "lone retry" else (str(pidfile),)
        task = asyncio.ensure_future(pool.run(_hang_writing_pid, *args))
        await _started(pidfile)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert await _wait_gone(int(pidfile.read_text())), "the stuck process outlived its cancelled caller"
        assert await pool.run(_square, 3) == 9
    finally:
        pool.shutdown()


def _pid_or_crash(x: int) -> int:
    if x == 0:
        os._exit(1)
    time.sleep(0.05)
    return os.getpid()


async def test_tasks_waiting_behind_a_crash_use_the_rebuilt_pool():
    """A crash retries the tasks that were in the pool alone; the tasks still waiting for a worker go to
    the rebuilt pool (not one fresh process each)."""
    pool = ResilientPool(1, task_timeout=30)
    try:
        results = await asyncio.gather(*(pool.run(_pid_or_crash, i) for i in range(12)), return_exceptions=True)
    finally:
        pool.shutdown()
    assert isinstance(results[0], WorkerCrash)
    pids = [r for r in results[1:] if isinstance(r, int)]
    assert len(pids) == 11
    assert len(set(pids)) <= 3, pids  # the rebuilt pool's worker (and at most two lone retries)


async def test_a_stuck_task_is_killed_even_after_the_pool_was_shut_down(tmp_path):
    from ocrserve.ingest.pool import WorkerTimeout

    pidfile = tmp_path / "pid"
    pool = ResilientPool(1, task_timeout=1.5)
    task = asyncio.ensure_future(pool.run(_hang_writing_pid, str(pidfile)))
    await _started(pidfile)
    first = int(pidfile.read_text())
    pool.shutdown()  # the executor forgets its processes; the stuck one must still be stopped
    with pytest.raises(WorkerTimeout):
        await task
    assert await _wait_gone(first)
    assert await _wait_gone(int(pidfile.read_text()))  # and the lone retry's


async def test_a_cancelled_callers_stuck_task_retires_its_pool(tmp_path):
    pidfile = tmp_path / "pid"
    pool = ResilientPool(1, task_timeout=1.5)
    try:
        task = asyncio.ensure_future(pool.run(_hang_writing_pid, str(pidfile)))
        await _started(pidfile)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert await _wait_gone(int(pidfile.read_text()))
        assert pool._generation == 1  # the killed pool was retired at once
        assert await pool.run(_square, 6) == 36
    finally:
        pool.shutdown()


def _echo_reversed(data: bytes) -> bytes:
    return data[::-1]


def _pipe_sizes(executor) -> list[int]:
    import fcntl

    return [fcntl.fcntl(q._reader.fileno(), 1032) for q in (executor._call_queue, executor._result_queue)]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="pipe sizes are Linux's (F_SETPIPE_SZ)")
async def test_the_pools_pipes_carry_a_page_in_one_write(monkeypatch):
    """The task and result pipes grown to a page's PNG (1 MiB, or the system's cap), both ways intact; with
    PIPE_BYTES 0 (the benchmarks' before) they stay at the OS's size."""
    from ocrserve.ingest import pool as pool_mod

    cap = min(pool_mod.PIPE_BYTES, int(Path("/proc/sys/fs/pipe-max-size").read_text()))
    data = os.urandom(3 << 20)  # larger than the pipes: still whole, in several turns
    pool = ResilientPool(1)
    try:
        assert await pool.run(_echo_reversed, data) == data[::-1]
        assert _pipe_sizes(pool._ensure()) == [cap, cap]
    finally:
        pool.shutdown()
    monkeypatch.setattr(pool_mod, "PIPE_BYTES", 0)
    pool = ResilientPool(1)
    try:
        assert await pool.run(_echo_reversed, b"page") == b"egap"
        assert all(n < cap for n in _pipe_sizes(pool._ensure()))
    finally:
        pool.shutdown()
