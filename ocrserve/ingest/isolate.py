"""Open and render documents in a child process of the Ray worker, so a file that crashes pdfium
fails alone.

A corrupt PDF can take pdfium, and the process it runs in, down. Inside a Ray task that would kill
the Ray worker: Ray retries the task (it crashes again every time) and then the whole run fails,
and since a block holds pages of several documents, innocent pages would go with it. So each Ray
worker keeps one child process for pdfium/PIL work (the Ray task itself never runs pdfium). When the
child dies, it is restarted and the call tried once more; a second crash fails that one document or
page with the local pipeline's reason ("the worker process crashed on this document (twice)",
ingest.pool.ResilientPool), and the task goes on with its other rows.

The child is started with forkserver (never fork: a Ray worker has many threads) and exits on its
own when the Ray worker that owns it is gone (Ray also kills a worker's child processes when it
exits normally; this covers a worker that was killed).
"""

from __future__ import annotations

import logging
import multiprocessing as mp
import os
import threading
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures import wait as futures_wait
from concurrent.futures.process import BrokenProcessPool
from typing import Any, Literal, TypeVar

from ocrserve.ingest.pool import (
    CRASH_MESSAGE,
    WorkerCrash,
    default_task_timeout,
    kill_workers,
    retire,
    timeout_error,
    widen_pipes,
)

log = logging.getLogger(__name__)

T = TypeVar("T")


def _start_method() -> str:
    from ocrserve.settings import get_settings

    chosen = get_settings().ray_child_start
    if chosen:
        return chosen
    return "forkserver" if "forkserver" in mp.get_all_start_methods() else "spawn"


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b") ", 1)[1][:1] not in (b"Z", b"X")  # a zombie is dead too
    except FileNotFoundError:
        return False
    except OSError:  # no /proc: ask the kernel
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            pass
        return True


def _watch_owner(owner: int, interval: float = 0.5) -> None:
    """In the child: exit when the process that owns it (the Ray worker) is gone. Its parent is the
    forkserver, which itself stays up while the child lives, so the owner is watched by pid."""

    def loop() -> None:
        import time

        while True:
            time.sleep(interval)
            if not _alive(owner):
                os._exit(0)

    threading.Thread(target=loop, name="ocrserve-owner-watch", daemon=True).start()


def quiet_dead_resource_tracker() -> None:
    """When a Ray worker exits, Ray kills its child processes, the multiprocessing resource tracker
    among them, while Python's own shutdown (an actor's __ray_shutdown__, exit handlers) still runs.
    The pools' semaphores are still unlinked by this process as it closes them; only telling the dead
    tracker would relaunch it ("resource_tracker: process died unexpectedly") and print a KeyError
    per semaphore from the new one. So from here on, tell the tracker only while it is alive."""
    try:
        from multiprocessing import resource_tracker as rt

        tracker = rt._resource_tracker

        def unregister(name: object, rtype: str) -> None:  # name: a semaphore's (typeshed: Sized)
            try:
                with tracker._lock:  # type: ignore[attr-defined]  # private, not in typeshed
                    fd = tracker._fd  # type: ignore[attr-defined]  # private, not in typeshed
                    if fd is not None:
                        os.write(fd, f"UNREGISTER:{name}:{rtype}\n".encode("ascii"))
            except OSError:  # the tracker is gone: nothing to tell
                pass

        rt.unregister = unregister
    except Exception:  # noqa: BLE001 - private API; at worst the warning comes back
        pass


_EXIT_HOOKED = False


class IsolatedCalls:
    """Runs picklable functions in one child process; a crash is retried once, then WorkerCrash; a call
    that runs past the timeout kills the child and is retried once, then WorkerTimeout."""

    def __init__(self, start_method: str | None = None, timeout: float | Literal["default"] | None = "default") -> None:
        self._ctx = mp.get_context(start_method or _start_method())
        self.timeout = default_task_timeout() if timeout == "default" else timeout
        self._pool: ProcessPoolExecutor | None = None
        self._lock = threading.Lock()

    def _ensure(self) -> ProcessPoolExecutor:
        global _EXIT_HOOKED
        if self._pool is None:
            if not _EXIT_HOOKED:
                _EXIT_HOOKED = True
                try:  # before concurrent.futures' own exit handler, which closes the pool's queues
                    threading._register_atexit(quiet_dead_resource_tracker)  # type: ignore[attr-defined]  # private, not in typeshed
                except Exception:  # noqa: BLE001 - private API; at worst a warning in the worker log
                    pass
            self._ctx_preload()
            self._pool = ProcessPoolExecutor(
                max_workers=1, mp_context=self._ctx, initializer=_watch_owner, initargs=(os.getpid(),)
            )
            widen_pipes(self._pool)  # a page's PNG in one write
        return self._pool

    def _ctx_preload(self) -> None:
        # the forkserver imports the render code once; a child restarted after a crash starts at once
        if self._ctx.get_start_method() == "forkserver":
            self._ctx.set_forkserver_preload(["__main__", "ocrserve.ingest.raster"])

    def _drop(self, pool: ProcessPoolExecutor) -> None:
        if self._pool is pool:
            self._pool = None
        retire(pool)

    def call(self, fn: Callable[..., T], *args: Any) -> T:
        with self._lock:  # one call at a time: the child holds pdfium, which is not thread-safe
            for attempt in (1, 2):
                pool = self._ensure()
                try:
                    fut = pool.submit(fn, *args)
                    futures_wait([fut], timeout=self.timeout)
                    if fut.done():  # a result, the task's own error (even a TimeoutError), or a crash
                        return fut.result()
                except BrokenProcessPool:
                    log.warning(
                        "the render child process died (%s, attempt %d); restarting it",
                        getattr(fn, "__name__", fn),
                        attempt,
                    )
                    self._drop(pool)
                    continue
                log.warning(
                    "the render child was stuck for %g s (%s, attempt %d); killing it",
                    self.timeout,
                    getattr(fn, "__name__", fn),
                    attempt,
                )
                kill_workers(pool)
                self._drop(pool)
                if attempt == 2:
                    assert self.timeout is not None  # without a limit wait() returns only when it is done
                    raise timeout_error(self.timeout)
            raise WorkerCrash(CRASH_MESSAGE)

    def close(self) -> None:
        with self._lock:
            if self._pool is not None:
                pool, self._pool = self._pool, None
                pool.shutdown(wait=True, cancel_futures=True)


_CALLS: IsolatedCalls | None = None
_CALLS_LOCK = threading.Lock()


def isolated(fn: Callable[..., T], *args: Any) -> T:
    """fn(*args) in this process's render child (started on first use, kept for later calls)."""
    global _CALLS
    with _CALLS_LOCK:
        if _CALLS is None:
            _CALLS = IsolatedCalls()
        calls = _CALLS
    return calls.call(fn, *args)
