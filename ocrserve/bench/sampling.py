"""Background sampling for the benchmarks: GPU memory (nvidia-smi), the server's queue (/metrics),
client memory and CPU time, and percentiles."""

from __future__ import annotations

import os
import shutil
import signal
import statistics
import subprocess
import threading
import time
from typing import Any

import httpx


class Sampler:
    """Background sampling of GPU memory (nvidia-smi), server queue (/metrics) and client RSS."""

    def __init__(self, server_root: str | None, interval: float = 0.5) -> None:
        self.server_root = server_root
        self.interval = interval
        self.gpu_mem_mib: list[float] = []
        self.queue: list[tuple[float, float, float]] = []  # (t, running, waiting)
        self.rss_mib: list[float] = []
        self._stop = threading.Event()
        self._t0 = time.perf_counter()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._smi = shutil.which("nvidia-smi")

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _loop(self) -> None:
        """Every interval: GPU memory, the server's queue, the client's memory. This thread's own CPU
        (reading every process's smaps for PSS, parsing /metrics) is the measuring's, not the client's:
        it is added to what client_cpu_s leaves out."""
        client = httpx.Client(timeout=2.0)
        try:
            while not self._stop.is_set():
                t0 = time.thread_time()
                if self._smi:
                    try:
                        out = run_uncounted(
                            [self._smi, "--query-gpu=memory.used", "--format=csv,noheader,nounits"], timeout=5
                        )
                        vals = [float(x) for x in out.split() if x.strip()]
                        if vals:
                            self.gpu_mem_mib.append(sum(vals))
                    except (OSError, ValueError, subprocess.SubprocessError):
                        pass
                if self.server_root:
                    try:
                        text = client.get(self.server_root + "/metrics").text
                        self.queue.append(
                            (
                                time.perf_counter() - self._t0,
                                _metric(text, "vllm:num_requests_running"),
                                _metric(text, "vllm:num_requests_waiting"),
                            )
                        )
                    except httpx.HTTPError:
                        pass
                self.rss_mib.append(client_rss_mib())
                with _LOCK:
                    _UNCOUNTED_S[0] += time.thread_time() - t0
                self._stop.wait(self.interval)
        finally:
            client.close()

    def summary(self) -> dict[str, Any]:
        running = [r for _, r, _ in self.queue]
        waiting = [w for _, _, w in self.queue]
        return {
            "peak_gpu_memory_mib": max(self.gpu_mem_mib) if self.gpu_mem_mib else None,
            "server_running_mean": round(statistics.fmean(running), 1) if running else None,
            "server_running_max": max(running) if running else None,
            "server_waiting_mean": round(statistics.fmean(waiting), 1) if waiting else None,
            "peak_client_rss_mib": round(max(self.rss_mib), 1) if self.rss_mib else None,
            "queue_series": [(round(t, 1), r, w) for t, r, w in self.queue[:: max(1, len(self.queue) // 60)]],
        }


def _metric(text: str, name: str) -> float:
    total = 0.0
    for line in text.splitlines():
        if line.startswith(name) and not line.startswith("#"):
            try:
                total += float(line.rsplit(" ", 1)[1])
            except (ValueError, IndexError):
                pass
    return total


def _proc_mem(p) -> int:
    """PSS where the OS has it (forked workers share pages: RSS would count them twice), else RSS."""
    try:
        return p.memory_full_info().pss
    except (AttributeError, Exception):  # noqa: BLE001 - no PSS on this OS / no permission
        return p.memory_info().rss


# Processes that are not the client although this process started them (a stand-in or vLLM server the
# bench launched): their subtrees are left out of the client's CPU and memory.
_NOT_CLIENT: set[int] = set()
_LOCK = threading.Lock()


def exclude_from_client(pid: int) -> None:
    """Leave process `pid` and its descendants out of client_cpu_s / client_rss_mib (a server we started)."""
    _NOT_CLIENT.add(pid)


def _client_procs():
    """This process and its descendants, minus the subtrees of the processes marked as not the client."""
    import psutil

    me = psutil.Process()
    out, stack = [me], list(me.children())
    while stack:
        c = stack.pop()
        if c.pid in _NOT_CLIENT:
            continue
        out.append(c)
        try:
            stack.extend(c.children())
        except psutil.Error:
            pass
    return out


def client_rss_mib() -> float:
    """Memory of this process and its children (render workers), in MiB (PSS on Linux); servers excluded."""
    try:
        import psutil

        total = 0
        for c in _client_procs():
            try:
                total += _proc_mem(c)
            except psutil.Error:
                pass
        return total / 2**20
    except ImportError:
        import resource

        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


_UNCOUNTED_S = [
    0.0
]  # CPU seconds of the measuring itself: its tools' children (nvidia-smi, reaped) and the sampler thread


def run_uncounted(argv: list[str], timeout: float = 10) -> str:
    """Run a measuring tool (nvidia-smi) and return its stdout; its CPU time is left out of client_cpu_s
    (a reaped child's CPU otherwise lands in this process's children times, as if the client spent it)."""
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    stdout = proc.stdout
    assert stdout is not None  # stdout=PIPE
    fired = threading.Event()

    def kill() -> None:  # os.kill, not Popen.kill: that would poll, and might reap the child before wait4
        fired.set()
        try:
            os.kill(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass

    timer = threading.Timer(timeout, kill)
    timer.start()
    try:
        out = stdout.read()
    finally:
        timer.cancel()
        stdout.close()
        with _LOCK:  # reaped here, not by Popen: with its resource usage
            _, status, ru = os.wait4(proc.pid, 0)
            proc.returncode = os.waitstatus_to_exitcode(status)
            _UNCOUNTED_S[0] += ru.ru_utime + ru.ru_stime
    if fired.is_set():
        raise subprocess.TimeoutExpired(argv, timeout)
    return out


def reap_uncounted(proc: subprocess.Popen, timeout: float | None = 0) -> int | None:
    """Popen.poll() (timeout 0) or wait(timeout) for a process that is not the client (a server the bench
    started): reaped with os.wait4, so its CPU, and that of the children it reaped, is left out of
    client_cpu_s. None while it runs (raises subprocess.TimeoutExpired when a timeout > 0 passes)."""
    deadline = None if timeout is None else time.monotonic() + timeout
    while proc.returncode is None:
        with _LOCK:
            try:
                pid, status, ru = os.wait4(proc.pid, os.WNOHANG)
            except ChildProcessError:  # reaped elsewhere
                return proc.poll()
            if pid:
                proc.returncode = os.waitstatus_to_exitcode(status)
                _UNCOUNTED_S[0] += ru.ru_utime + ru.ru_stime
                break
        if deadline is not None and time.monotonic() >= deadline:
            if timeout:
                raise subprocess.TimeoutExpired(proc.args, timeout)
            return None
        time.sleep(0.05)
    return proc.returncode


def client_cpu_s() -> float:
    """CPU seconds of this process and its children (live ones and reaped ones); servers excluded."""
    try:
        import psutil

        procs = _client_procs()
        with _LOCK:  # the children times and what is subtracted from them, at one moment
            t = procs[0].cpu_times()
            total = t.user + t.system + t.children_user + t.children_system - _UNCOUNTED_S[0]
        for c in procs[1:]:
            try:
                ct = c.cpu_times()
                total += ct.user + ct.system
            except psutil.Error:
                pass
        return total
    except ImportError:
        import resource

        a, b = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
        return a.ru_utime + a.ru_stime + b.ru_utime + b.ru_stime


def pct(values: list[float], q: float) -> float | None:
    if not values:
        return None
    v = sorted(values)
    k = min(len(v) - 1, max(0, int(round(q / 100 * (len(v) - 1)))))
    return round(v[k], 3)
