"""A process pool for rendering that survives a worker crash.

A corrupt PDF can take pdfium (and its worker process) down. The pool is then rebuilt, the task
that was running is tried once more, and if it crashes again it fails alone; the other documents
go on. A task that hangs (a PDF pdfium loops on) is stopped after the task timeout: the pool's
processes are killed, and that task and the others that were running are retried like after a
crash; a task that hangs again fails with WorkerTimeout.
"""

from __future__ import annotations

import asyncio
import logging
import multiprocessing as mp
import os
import sys
import threading
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from functools import partial
from typing import Any, Literal

from ocrserve.errors import OcrserveError

log = logging.getLogger(__name__)


def usable_cpus() -> int:
    """The CPUs this process may run on: its affinity (a container's cpuset, `taskset`), where the OS tells it,
    else the machine's CPU count. Workers are sized by it: 8 processes on 2 allowed cores only contend."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):  # no affinity API (macOS, Windows)
        return os.cpu_count() or 1


def default_workers(requested: int = 0, cap: int = 8) -> int:
    if requested and requested > 0:
        return requested
    return max(1, min(cap, usable_cpus()))


def default_start_method() -> str:
    """fork on Linux (fast, and scripts need no __main__ guard; the parent never uses pdfium or
    RapidOCR itself) — except in a process where Ray runs (a driver or a worker): its native threads
    make fork unsafe (a forked child can hang in the dynamic loader), so spawn there.
    The platform default elsewhere; OCRSERVE_MP_START overrides."""
    from ocrserve.settings import get_settings

    chosen = get_settings().mp_start
    if chosen:
        return chosen
    if not sys.platform.startswith("linux"):
        return mp.get_start_method()
    ray = sys.modules.get("ray")
    if ray is not None and getattr(ray, "is_initialized", lambda: False)():
        return "spawn"
    return "fork"


def _worker_init(initializer, initargs) -> None:
    """In each worker: die with the parent, leave SIGINT to the parent, SIGTERM ends the worker.

    Forked workers inherit the parent's signal handlers (uvicorn's, the CLI's); without this a
    worker could outlive a killed parent holding memory, or swallow SIGTERM.
    """
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    if sys.platform.startswith("linux"):
        try:
            import ctypes

            libc = ctypes.CDLL("libc.so.6", use_errno=True)
            libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
            if os.getppid() == 1:  # the parent died before prctl took effect
                os._exit(1)
        except (OSError, AttributeError):
            pass
    if initializer is not None:
        initializer(*initargs)


class WorkerCrash(OcrserveError):
    """The worker process died while handling this task."""


def _call_soon(loop: asyncio.AbstractEventLoop, callback) -> None:
    """callback on the loop, from another thread; nothing when the loop has closed meanwhile."""
    try:
        loop.call_soon_threadsafe(callback)
    except RuntimeError:
        pass


def _consume(fut) -> None:
    """Retrieve a given-up future's outcome (no 'exception was never retrieved' warning)."""
    if not fut.cancelled():
        fut.exception()


class WorkerTimeout(WorkerCrash):
    """The task ran past the pool's task timeout; its worker was killed."""


CRASH_MESSAGE = "the worker process crashed on this document (twice)"


def timeout_error(seconds: float) -> WorkerTimeout:
    return WorkerTimeout(
        f"timed out after {seconds:g} s (twice): the worker was stuck on this document "
        "(OCRSERVE_RENDER_TIMEOUT_S sets the limit)"
    )


def default_task_timeout(settings=None) -> float | None:
    """Seconds a render task may take (settings' render_timeout_s, OCRSERVE_RENDER_TIMEOUT_S: default 120;
    0 = no limit)."""
    if settings is None:
        from ocrserve.settings import Settings

        settings = Settings()
    return settings.render_timeout_s or None


PIPE_BYTES = 1 << 20  # a page's PNG (400 KB born-digital) in one write and one read, not in 64 KB turns
_F_SETPIPE_SZ, _F_GETPIPE_SZ = 1031, 1032  # Linux's fcntl commands (Python 3.10+ names them in fcntl)


def widen_pipes(pool: ProcessPoolExecutor, size: int | None = None) -> int | None:
    """Grow the pipes that carry the pool's tasks and results (Linux) from 64 KB to `size` (at most the
    system's /proc/sys/fs/pipe-max-size): a 400 KB page then crosses in one write and one read instead of
    seven turns of writer and reader, which cost the parent and the worker ~1.3 ms a page in all
    (bench/results/pool-pipes-2026-12-06/). The pipe size the pool got, or None where it stays as it was
    (another OS, another Python's executor, a limit that refuses it; PIPE_BYTES 0: left as they are, the
    benchmarks' before); best effort, nothing else changes."""
    size = PIPE_BYTES if size is None else size
    if size <= 0 or not sys.platform.startswith("linux"):
        return None
    try:
        import fcntl

        with open("/proc/sys/fs/pipe-max-size") as f:
            size = min(size, int(f.read()))
        got = None
        for q in (getattr(pool, "_call_queue", None), getattr(pool, "_result_queue", None)):
            fd = q._reader.fileno()  # type: ignore[union-attr]
            fcntl.fcntl(fd, _F_SETPIPE_SZ, size)
            got = fcntl.fcntl(fd, _F_GETPIPE_SZ)
        return got
    except (OSError, AttributeError, ValueError):
        return None


def worker_processes(pool: ProcessPoolExecutor) -> list:
    """The pool's worker processes now (the executor forgets them once it is shut down)."""
    return list((getattr(pool, "_processes", None) or {}).values())


def kill_workers(pool: ProcessPoolExecutor, also: list | None = None) -> None:
    """SIGKILL the pool's worker processes, and `also` (processes seen earlier: a pool shut down meanwhile
    no longer lists them) — a stuck pdfium call cannot be interrupted otherwise; the executor then
    reports the pool broken to every waiting task."""
    for proc in {id(p): p for p in worker_processes(pool) + list(also or [])}.values():
        try:
            proc.kill()
        except (OSError, ValueError, AttributeError):
            pass


_RETIRED: dict[threading.Thread, list] = {}  # management threads of pools shut down without waiting -> their processes
_RETIRED_LOCK = threading.Lock()
_EXIT_HOOKED = False


def retire(pool: ProcessPoolExecutor, *, cancel_futures: bool = True) -> None:
    """pool.shutdown(wait=False), made safe at interpreter exit.

    The executor's management thread goes on shutting the pool down and finally closes its wakeup
    pipe; concurrent.futures' exit hook writes to that pipe (Python 3.11 checks "closed" and writes
    without a lock). A process exiting while the thread closes it printed `OSError: [Errno 9] Bad
    file descriptor` from `_python_exit` (#18.9). So the thread is remembered here and joined by an
    exit hook that runs before concurrent.futures' own (its processes are killed if it takes long).
    """
    global _EXIT_HOOKED
    procs = worker_processes(pool)
    thread = getattr(pool, "_executor_manager_thread", None)  # shutdown() forgets it
    pool.shutdown(wait=False, cancel_futures=cancel_futures)
    if thread is None or not thread.is_alive():
        return
    with _RETIRED_LOCK:
        for t in [t for t in _RETIRED if not t.is_alive()]:
            del _RETIRED[t]
        _RETIRED[thread] = procs
        if not _EXIT_HOOKED:
            _EXIT_HOOKED = True
            # threading runs these last-registered first: this one before concurrent.futures'
            # _python_exit, registered when concurrent.futures.process was imported (above)
            threading._register_atexit(_join_retired)  # type: ignore[attr-defined]  # private, not in typeshed


def _join_retired(timeout: float = 5.0) -> None:
    with _RETIRED_LOCK:
        items = list(_RETIRED.items())
        _RETIRED.clear()
    for thread, procs in items:
        thread.join(timeout)
        if thread.is_alive():  # a worker stuck in pdfium: kill it, the thread then finishes
            for proc in procs:
                try:
                    proc.kill()
                except (OSError, ValueError, AttributeError):
                    pass
            thread.join(timeout)


class ResilientPool:
    """A process pool for one event loop (a Converter's, a service's): at most `workers` tasks are handed
    to the processes at once, and a task's timeout counts while it is handed out."""

    def __init__(
        self,
        workers: int,
        initializer=None,
        initargs=(),
        start_method: str | None = None,
        task_timeout: float | Literal["default"] | None = "default",
    ) -> None:
        """task_timeout: seconds a task may run (None: no limit; "default": OCRSERVE_RENDER_TIMEOUT_S or 120)."""
        self.workers = workers
        self.task_timeout = default_task_timeout() if task_timeout == "default" else task_timeout
        self._initializer, self._initargs = initializer, initargs
        self._ctx = mp.get_context(start_method or default_start_method())
        self._pool: ProcessPoolExecutor | None = None
        self._generation = 0
        self._slots = asyncio.Semaphore(max(1, workers))

    def _ensure(self) -> ProcessPoolExecutor:
        if self._pool is None:
            self._pool = self._executor(self.workers)
        return self._pool

    def _executor(self, workers: int) -> ProcessPoolExecutor:
        pool = ProcessPoolExecutor(
            max_workers=workers,
            mp_context=self._ctx,
            initializer=_worker_init,
            initargs=(self._initializer, self._initargs),
        )
        widen_pipes(pool)
        return pool

    async def run(self, fn, *args, **kwargs):
        """Run fn in a worker. If a worker dies (this task's or another's: the whole pool breaks) or a
        task is stuck past the task timeout (its pool is killed), the tasks that were in the pool are
        tried again alone in a fresh process each, so only a task that crashes (or hangs) by itself
        fails, with WorkerCrash (WorkerTimeout)."""
        if kwargs:
            fn = partial(fn, **kwargs)
        return await self.run_within(self.task_timeout, fn, *args)

    async def run_within(self, timeout: float | None, fn, *args):
        """run(), with this task's own timeout (seconds; None: no limit) in place of the pool's."""
        got, result = await self._attempt(fn, args, timeout)
        if got:
            return result
        solo = self._executor(1)
        try:
            got, result = await self._attempt(fn, args, timeout, solo=solo)
        finally:
            retire(solo, cancel_futures=False)
        if got:
            return result
        raise result

    async def _attempt(
        self, fn, args, timeout: float | None, solo: ProcessPoolExecutor | None = None
    ) -> tuple[bool, Any]:
        """(True, result) — or the task's own exception raised — when fn ran to its end; (False, error)
        when its pool broke under it or it was stuck (then the pool's processes are killed). Without
        `solo`, in the shared pool (a pool found broken or retired before the task was handed out is
        replaced, and the task handed to the new one: that is not an attempt)."""
        loop = asyncio.get_running_loop()
        await self._slots.acquire()  # a task's clock starts when a worker is free, not in a queue
        release = True
        try:
            cf = None
            for _ in range(2 if solo is None else 1):
                if solo is None:
                    gen, pool = self._generation, self._ensure()
                else:
                    pool = solo
                try:
                    cf = pool.submit(fn, *args)
                    break
                except (BrokenProcessPool, RuntimeError):  # broken while idle, or shut down meanwhile
                    if solo is None:
                        self._rebuild(gen)
            if cf is None:
                return False, WorkerCrash(CRASH_MESSAGE)
            procs = worker_processes(pool)
            deadline = None if timeout is None else loop.time() + timeout
            fut = asyncio.wrap_future(cf)
            try:
                await asyncio.wait({fut}, timeout=timeout)
            except asyncio.CancelledError:
                fut.add_done_callback(_consume)
                if not cf.cancel():  # already running: the slot stays taken until the worker is free
                    release = False
                    cf.add_done_callback(lambda _: _call_soon(loop, self._slots.release))
                    if solo is not None:
                        kill_workers(pool, procs)
                    elif deadline is not None:  # a stuck one is still stopped at its own deadline
                        loop.call_later(max(0.0, deadline - loop.time()), self._watchdog, cf, pool, procs, timeout)
                raise
            if fut.done():
                try:
                    return True, fut.result()
                except BrokenProcessPool:
                    if solo is None:
                        self._rebuild(gen)
                    return False, WorkerCrash(CRASH_MESSAGE)
            # stuck: a document pdfium loops on, or (rarely) a worker forked while another thread held a
            # lock. Kill the pool's processes: every task in it then fails with BrokenProcessPool and is
            # retried alone, this one too.
            assert timeout is not None  # without a limit wait() returns only when it is done
            log.warning(
                "a worker was stuck for %g s (%s); killing %s",
                timeout,
                getattr(fn, "__name__", "task"),
                "its process" if solo is not None else "the pool's processes",
            )
            kill_workers(pool, procs)
            fut.add_done_callback(_consume)
            if solo is None:
                self._rebuild(gen)
            return False, timeout_error(timeout)
        finally:
            if release:
                self._slots.release()

    def _watchdog(self, cf, pool: ProcessPoolExecutor, procs: list, timeout: float | None) -> None:
        """A cancelled caller's task still running at its deadline: kill its pool and retire it."""
        if cf.done():
            return
        log.warning("a worker was stuck for %g s on a cancelled task; killing the pool's processes", timeout)
        kill_workers(pool, procs)
        if self._pool is pool:
            self._rebuild(self._generation)

    def _rebuild(self, gen: int) -> None:
        """Retire the shared pool if it is still the one of generation `gen` (the first to notice a break
        does it; the next task gets a fresh pool). Runs on the event loop, without awaiting: atomic."""
        if gen == self._generation and self._pool is not None:
            log.warning("a worker process died or was killed; restarting the pool")
            old, self._pool = self._pool, None
            self._generation += 1
            # no cancel_futures: tasks still in it fail with BrokenProcessPool and are retried
            retire(old, cancel_futures=False)

    def shutdown(self) -> None:
        self._generation += 1  # a late failure from the old pool never discards a new one
        if self._pool is not None:
            retire(self._pool)
            self._pool = None


def run_pool(settings, workers: int | None = None, initializer=None, initargs=()) -> ResilientPool:
    """The worker pool of a run or a service, made here only: rendering, parsing, and the pages of an engine
    that runs them in the run's pool (lite). `workers` processes (None: settings' render_workers; unset or
    0: the CPUs it may use, at most 8), settings' start method and task timeout (OCRSERVE_RENDER_TIMEOUT_S)."""
    return ResilientPool(
        default_workers(settings.render_workers if workers is None else workers, cap=8),
        initializer,
        initargs,
        start_method=settings.mp_start,
        task_timeout=default_task_timeout(settings),
    )
