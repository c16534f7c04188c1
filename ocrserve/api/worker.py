"""The job worker: tasks that take queued jobs from the store and convert them with the shared engine.

A finished job keeps its result; its input is removed at once. A job deleted while it runs is cancelled
(`cancel`); its id is remembered only until that cancellation has been handled. Each converted page is
kept in the job's `pages/` folder until the job ends, so a job interrupted by a stop (or a kill) goes
on after the restart from where it was: only its missing pages are converted. An encrypted upload's
password is kept in its input folder (owner-only file) and goes with the input when the job ends.

The job store is SQLite, which another process may lock for a while (a backup, an operator's shell): every
store call runs in a thread (never on the event loop: /healthz and the other routes go on answering), and a
loop whose store call fails logs it, is not ready (`healthy()`, which /readyz asks), waits (0.5 s doubling
to 30 s) and tries again: no loop dies of it. A finished job whose end cannot be recorded is tried again
the same way.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import shutil
import time
from collections.abc import Callable
from functools import partial
from glob import escape as glob_escape
from pathlib import Path
from typing import Any, TypeVar

from ocrserve.api.figures import keep_figures
from ocrserve.api.jobs import JobStatus, JobStore
from ocrserve.api.service import Checked, Service
from ocrserve.document import Document, Page
from ocrserve.render import render_json

log = logging.getLogger(__name__)
T = TypeVar("T")


BACKOFF_S = (0.5, 30.0)  # a failing store call is tried again after 0.5 s, doubling up to 30 s


class JobWorker:
    def __init__(self, service: Service, store: JobStore, workers: int) -> None:
        self.service, self.store = service, store
        self.n = max(1, int(workers))
        self.store_error: str | None = None  # the last store call failed (cleared by the next that works)
        self.wake = asyncio.Event()
        self.running: dict[str, asyncio.Task] = {}
        self.deleted: set[str] = set()  # running jobs deleted, until their task has stopped
        self.stopping = False
        self._loops: list[asyncio.Task] = []

    def start(self) -> None:
        n = self.store.recover()
        if n:
            log.warning("resuming %d job(s) left running by a stopped service", n)
        self._loops = [asyncio.create_task(self._loop(), name=f"ocrserve-job-worker-{i}") for i in range(self.n)]

    async def stop(self) -> None:
        self.stopping = True
        for t in self._loops:
            t.cancel()
        await asyncio.gather(*self._loops, return_exceptions=True)

    def notify(self) -> None:
        self.wake.set()

    def cancel(self, job_id: str) -> None:
        """A deleted job: stop converting it if it runs (a job not running has nothing to stop)."""
        t = self.running.get(job_id)
        if t is not None and not t.done():
            self.deleted.add(job_id)
            t.cancel()

    def healthy(self) -> str | None:
        """None while every loop runs and the store answers; else what is wrong (for /readyz)."""
        dead = sum(t.done() for t in self._loops)
        if dead:
            return f"{dead} of {len(self._loops)} job worker loop(s) stopped"
        return f"job store: {self.store_error}" if self.store_error else None

    async def _store(self, fn: Callable[..., T], *args: Any) -> T:
        """fn(*args) in a thread, tried again (with a growing pause) while it fails and the service runs."""
        pause = BACKOFF_S[0]
        while True:
            try:
                out = await asyncio.to_thread(fn, *args)
            except Exception as e:
                if self.store_error is None:
                    name = getattr(getattr(fn, "func", fn), "__name__", "call")
                    log.exception("job store failed (%s); trying again every %g-%g s", name, *BACKOFF_S)
                self.store_error = f"{type(e).__name__}: {e}"
                self.service.metrics.failures.labels(kind="store").inc()
                if self.stopping:
                    raise
                await asyncio.sleep(pause)
                pause = min(pause * 2, BACKOFF_S[1])
                continue
            if self.store_error is not None:
                log.warning("job store answers again")
                self.store_error = None
            return out

    async def _loop(self) -> None:
        while not self.stopping:
            job = await self._store(self.store.claim)
            if job is None:
                self.wake.clear()
                try:
                    await asyncio.wait_for(self.wake.wait(), timeout=1.0)
                except TimeoutError:
                    pass
                continue
            t = asyncio.create_task(self._run(job))
            self.running[job["id"]] = t
            try:
                await asyncio.wait({t})
            except asyncio.CancelledError:  # the service stops: the job goes back to the queue
                t.cancel()
                await asyncio.wait({t})
                raise
            finally:
                self.running.pop(job["id"], None)
                self.deleted.discard(job["id"])

    async def _run(self, job: dict) -> None:
        job_id = job["id"]
        counts = {"done": 0, "failed": 0}

        pages_dir, doc_dir = self.store.job_path(job_id, "pages"), self.store.job_path(job_id, "doc")
        # pages are reused only by the same model and engine
        run = {
            "model": getattr(getattr(self.service, "profile", None), "name", None),
            "engine": getattr(getattr(self.service, "engine", None), "name", None),
        }
        known = await asyncio.to_thread(_load_pages, pages_dir, run)
        if known:
            log.info("job %s: %d page(s) kept from an interrupted run", job_id, len(known))

        changed = asyncio.Event()

        async def write_progress() -> None:  # the latest counts, in a thread: never the event loop
            while True:
                await changed.wait()
                changed.clear()
                try:
                    await asyncio.to_thread(self.store.progress, job_id, counts["done"], counts["failed"])
                except Exception as e:  # noqa: BLE001 - progress is a report: the next one may get through
                    log.warning("job %s: cannot record its progress: %s", job_id, e)

        def on_page(index: int, status: str, page: Page | None = None) -> None:
            # kept before it is counted; only pages the model read (a fallback page, e.g. while the model
            # server was down, is asked of the model again after a restart)
            if page is not None and status == "ok" and index not in known and job_id not in self.deleted:
                try:
                    _write_page(pages_dir, page, run, doc_dir)
                except OSError as e:  # a checkpoint is a saving, never a failure
                    log.warning("job %s: cannot keep page %d for a resume: %s", job_id, index + 1, e)
            counts["done"] += 1
            counts["failed"] += status == "failed"
            changed.set()

        path = Path(job["input_path"])
        password = await asyncio.to_thread(load_password, path.parent)
        checked = Checked(
            path=path,
            filename=job["filename"],
            info=None,
            pages=job["pages"],
            selected=job["pages_total"],
            password=password,
        )
        progress = asyncio.create_task(write_progress())
        try:
            result, interrupted = await self.service.convert(
                checked, on_page=on_page, known_pages=known, owner=job["key"], figures_dir=doc_dir
            )
        except asyncio.CancelledError:
            interrupted = True
            result = None
        except Exception as e:
            log.exception("job %s", job_id)
            self.service.metrics.failures.labels(kind="internal").inc()
            await self._finish(job_id, "failed", error=f"internal error: {e!r}")
            return
        finally:
            progress.cancel()
        if interrupted or result is None:
            if job_id not in self.deleted:
                await asyncio.to_thread(self.store.requeue, job_id)
                log.info("job %s interrupted; back in the queue", job_id)
            return
        if job_id in self.deleted:
            return
        if result.document is None:
            self.service.metrics.failures.labels(kind="job").inc()
            await self._finish(job_id, "failed", error=result.error)
            return
        doc = result.document
        end = {
            **job,
            "error": result.error,
            "pages_done": len(doc.pages),
            "pages_failed": sum(p.status == "failed" for p in doc.pages),
        }
        try:
            # rendered there, off the event loop; the figure crops go to the job's images/
            await asyncio.to_thread(self._write_result, job_id, doc, end, result.output)
        except OSError as e:  # a full disk: what the job holds goes first, so that its end can be recorded
            await asyncio.to_thread(self.store.drop_input, job_id)
            await asyncio.to_thread(shutil.rmtree, self.store.job_path(job_id, "pages"), True)
            await asyncio.to_thread(shutil.rmtree, self.store.job_path(job_id, "doc"), True)
            await self._finish(job_id, "failed", error=f"cannot write the result: {e.strerror or e}")
            return
        await self._finish(
            job_id, "done", error=result.error, pages_done=end["pages_done"], pages_failed=end["pages_failed"]
        )

    async def _finish(self, job_id: str, status: JobStatus, **kw: Any) -> None:
        """Record the job's end; its input goes (the result is what is kept). If this is interrupted
        before the input is gone, the next start's tidy removes it."""
        if await self._store(partial(self.store.finish, job_id, status, **kw)):
            await asyncio.to_thread(self.store.drop_input, job_id)
            await asyncio.to_thread(shutil.rmtree, self.store.job_path(job_id, "pages"), True)

    def _write_result(self, job_id: str, doc: Document, end: dict[str, Any], folder: Path | None) -> None:
        """In a thread, which runs to its end even if the job is cancelled meanwhile: a job deleted while
        its result was written leaves no folder behind (the check comes after the write). The job's row
        goes beside the result (job.json), so a database restored from a backup finds the job again."""
        try:
            keep_figures(folder, self.store.job_path(job_id, "images"), self.store.job_path(job_id, "pages") / "images")
            _write_atomic(self.store.job_path(job_id, "result.json"), render_json(doc))
            self.store.write_meta(job_id, {**end, "status": "done", "finished": time.time()})
        finally:
            if self.store.owner(job_id) is None:  # deleted meanwhile
                shutil.rmtree(self.store.job_dir(job_id), ignore_errors=True)


_PASSWORD_FILE = ".password"


def save_password(input_dir: Path, password: str) -> None:
    """An encrypted upload's password, kept beside it (owner-only) until the job ends and its input goes."""
    path = input_dir / _PASSWORD_FILE
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(password)


def load_password(input_dir: Path) -> str | None:
    try:
        return (input_dir / _PASSWORD_FILE).read_text(encoding="utf-8") or None
    except OSError:
        return None


def _write_atomic(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)  # a torn one (a full disk) takes no room


def _write_page(folder: Path, page: Page, run: dict, doc_dir: Path | None = None) -> None:
    """One finished page of a running job (atomic: a torn file would only be converted again), with its
    figure crops (from the conversion's staging folder under doc_dir; a page whose crops are not found is
    not kept). The job's folder must exist: a job deleted meanwhile gets no folder back."""
    crops = {}
    for b in page.blocks:
        if b.figure:
            found = doc_dir and next(iter(doc_dir.glob(f".*.partial-*/{glob_escape(b.figure)}")), None)
            if not found:
                return
            crops[b.figure] = found
    folder.mkdir(exist_ok=True)  # not parents: a deleted job's folder is not made again
    for rel, src in crops.items():
        (folder / rel).parent.mkdir(exist_ok=True)
        shutil.copyfile(src, folder / rel)
    if not (folder / "run.json").is_file():
        tmp = folder / ".run.json.tmp"
        tmp.write_text(json.dumps(run), encoding="utf-8")
        os.replace(tmp, folder / "run.json")
    tmp = folder / f".{page.index}.json.tmp"
    tmp.write_text(page.model_dump_json(), encoding="utf-8")
    os.replace(tmp, folder / f"{page.index}.json")


def _load_pages(folder: Path, run: dict) -> dict[int, Page]:
    """The pages an interrupted run of the job finished with the same model and engine (unreadable ones
    are left out: converted again). Pages of another model or engine are dropped."""
    pages: dict[int, Page] = {}
    if not folder.is_dir():
        return pages
    try:
        same = json.loads((folder / "run.json").read_text(encoding="utf-8")) == run
    except (OSError, ValueError):
        same = False
    if not same:
        shutil.rmtree(folder, ignore_errors=True)
        return pages
    for f in folder.glob("*.json"):
        if not f.stem.isdigit():
            continue
        try:
            page = Page.model_validate_json(f.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        crops = all(b.figure is None or (folder / b.figure).is_file() for b in page.blocks)
        if f.stem == str(page.index) and page.status == "ok" and crops:
            pages[page.index] = page
    return pages
