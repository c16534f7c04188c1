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
from functools import partial
from typing import Any
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool

log = logging.getLogger(__name__)


def default_workers(requested: int = 0, cap: int = 8) -> int:
    if requested and requested > 0:
        return requested
    return max(1, min(cap, os.cpu_count() or 1))


def default_start_method() -> str:
    """fork on Linux (fast, and scripts need no __main__ guard; the parent never uses pdfium or
    RapidOCR itself) — except in a process where Ray runs (a driver or a worker): its native threads
    make fork unsafe (a forked child can hang in the dynamic loader), so spawn there.
    The platform default elsewhere; OCRSERVE_MP_START overrides."""
    env = os.environ.get("OCRSERVE_MP_START")
    if env:
        return env
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


class WorkerCrash(Exception):
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


def default_task_timeout() -> float | None:
    """Seconds a render task may take (OCRSERVE_RENDER_TIMEOUT_S, default 120; 0 = no limit)."""
    from ..settings import Settings

    value = Settings().render_timeout_s
    return value if value > 0 else None


def kill_workers(pool: ProcessPoolExecutor) -> None:
    """SIGKILL the pool's worker processes (a stuck pdfium call cannot be interrupted otherwise); the
    executor then reports the pool broken to every waiting task."""
    procs = getattr(pool, "_processes", None) or {}
    for proc in list(procs.values()):
        try:
            proc.kill()
        except (OSError, ValueError, AttributeError):
            pass


class ResilientPool:
    def __init__(self, workers: int, initializer=None, initargs=(), start_method: str | None = None,
                 task_timeout: float | None | str = "default") -> None:
        """task_timeout: seconds a task may run (None: no limit; "default": OCRSERVE_RENDER_TIMEOUT_S or 120)."""
        self.workers = workers
        self.task_timeout = default_task_timeout() if task_timeout == "default" else task_timeout
        self._initializer, self._initargs = initializer, initargs
        self._ctx = mp.get_context(start_method or default_start_method())
        self._pool: ProcessPoolExecutor | None = None
        self._generation = 0
        self._lock = asyncio.Lock()
        self._slots = asyncio.Semaphore(max(1, workers))

    def _ensure(self) -> ProcessPoolExecutor:
        if self._pool is None:
            self._pool = ProcessPoolExecutor(
                max_workers=self.workers, mp_context=self._ctx,
                initializer=_worker_init, initargs=(self._initializer, self._initargs),
            )
        return self._pool

    async def run(self, fn, *args, **kwargs):
        """Run fn in a worker. If a worker dies (this task's or another's: the whole pool breaks) or a
        task is stuck past the task timeout (its pool is killed), the tasks that were in the pool are
        tried again alone in a fresh process each, so only a task that crashes (or hangs) by itself
        fails, with WorkerCrash (WorkerTimeout)."""
        if kwargs:
            fn = partial(fn, **kwargs)
        # a task's clock starts when a worker is free, not in a queue; a slot is held until the worker is
        # free again (also when the caller is cancelled while its task runs)
        gen = self._generation
        pool = self._ensure()
        got, result = await self._attempt(pool, fn, args)
        if got:
            return result
        await self._rebuild(gen)
        solo = ProcessPoolExecutor(max_workers=1, mp_context=self._ctx, initializer=_worker_init,
                                   initargs=(self._initializer, self._initargs))
        try:
            got, result = await self._attempt(solo, fn, args, solo=True)
        finally:
            solo.shutdown(wait=False)
        if got:
            return result
        raise result

    async def _attempt(self, pool: ProcessPoolExecutor, fn, args, solo: bool = False) -> tuple[bool, Any]:
        """(True, result) — or the task's own exception raised — when fn ran to its end in `pool`;
        (False, error) when the pool broke or the task was stuck (then the pool's processes are killed)."""
        loop = asyncio.get_running_loop()
        await self._slots.acquire()
        release = True
        try:
            try:
                cf = pool.submit(fn, *args)
            except (BrokenProcessPool, RuntimeError):  # broken (a worker died while idle) or shut down
                return False, WorkerCrash("the worker process crashed on this document (twice)")
            fut = asyncio.wrap_future(cf)
            try:
                await asyncio.wait({fut}, timeout=self.task_timeout)
            except asyncio.CancelledError:
                fut.add_done_callback(_consume)
                if not cf.cancel():  # already running: the slot stays taken until the worker is free
                    release = False
                    cf.add_done_callback(lambda _: _call_soon(loop, self._slots.release))
                    if self.task_timeout is not None:  # and a stuck one is still stopped in time
                        loop.call_later(self.task_timeout, lambda: cf.done() or kill_workers(pool))
                if solo:
                    kill_workers(pool)
                raise
            if fut.done():
                try:
                    return True, fut.result()
                except BrokenProcessPool:
                    return False, WorkerCrash("the worker process crashed on this document (twice)")
            # stuck: a document pdfium loops on, or (rarely) a worker forked while another thread held a
            # lock. Kill the pool's processes: every task in it then fails with BrokenProcessPool and is
            # retried alone, this one too.
            log.warning("a worker was stuck for %g s (%s); killing %s",
                        self.task_timeout, getattr(fn, "__name__", "task"),
                        "its process" if solo else "the pool's processes")
            kill_workers(pool)
            fut.add_done_callback(_consume)
            return False, self._timeout_error()
        finally:
            if release:
                self._slots.release()

    def _timeout_error(self) -> WorkerTimeout:
        return WorkerTimeout(f"timed out after {self.task_timeout:g} s (twice): the worker was stuck on this "
                             "document (OCRSERVE_RENDER_TIMEOUT_S sets the limit)")

    async def _rebuild(self, gen: int) -> None:
        async with self._lock:
            if gen == self._generation:  # first to notice: rebuild the shared pool
                log.warning("a worker process died; restarting the pool")
                old, self._pool = self._pool, None
                self._generation += 1
                if old is not None:
                    # no cancel_futures: the tasks still queued in it fail with BrokenProcessPool (and are
                    # retried by their callers) instead of being cancelled under them
                    old.shutdown(wait=False)

    def shutdown(self) -> None:
        self._generation += 1  # a late failure from the old pool never discards a new one
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None
