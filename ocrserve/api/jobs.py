"""Persistent jobs: one SQLite database (WAL) plus a folder per job under the data directory.

    DATA/jobs.sqlite3            the jobs table
    DATA/jobs/<id>/input/<name>  the uploaded document (removed once the job has finished)
    DATA/jobs/<id>/result.json   the Document JSON once the job is done

A job goes queued -> running -> done | failed. A service that stops (even killed) leaves its running
jobs as `running`; `JobStore.recover()` at start puts them back to `queued`, so none is lost.

Retention: a finished job (done or failed) is kept `ttl_s` seconds after it finished, then it is
expired: `get()` no longer sees it at once, and `expire()` (the service's periodic sweep) removes its
row and folder. Queued and running jobs never expire. `tidy()` (at startup) removes what a stopped
service may have left: job folders without a row, inputs of finished jobs.
"""

from __future__ import annotations

import logging
import re
import shutil
import sqlite3
import threading
import time
import uuid
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel

log = logging.getLogger(__name__)

JobStatus = Literal["queued", "running", "done", "failed"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS jobs (
    id TEXT PRIMARY KEY,
    key TEXT NOT NULL,
    status TEXT NOT NULL,
    filename TEXT NOT NULL,
    input_path TEXT NOT NULL,
    pages TEXT,
    pages_total INTEGER NOT NULL DEFAULT 0,
    pages_done INTEGER NOT NULL DEFAULT 0,
    pages_failed INTEGER NOT NULL DEFAULT 0,
    attempts INTEGER NOT NULL DEFAULT 0,
    error TEXT,
    created REAL NOT NULL,
    started REAL,
    finished REAL
);
CREATE INDEX IF NOT EXISTS jobs_status ON jobs (status, created);
CREATE INDEX IF NOT EXISTS jobs_key ON jobs (key, status);
CREATE INDEX IF NOT EXISTS jobs_finished ON jobs (status, finished);
"""

FINISHED = ("done", "failed")
_JOB_ID = re.compile(r"[0-9a-f]{32}")


class Job(BaseModel):
    """A job as the API shows it (the key is not shown)."""

    id: str
    status: JobStatus
    filename: str
    pages: str | None = None
    pages_total: int = 0
    pages_done: int = 0
    pages_failed: int = 0
    attempts: int = 0
    error: str | None = None
    created: float
    started: float | None = None
    finished: float | None = None


class JobStore:
    """Thread-safe access to the jobs table (one connection, a lock; every call is short).

    ttl_s: seconds a finished job is kept after it finished (0 or less: kept until deleted).
    """

    def __init__(self, data_dir: Path, ttl_s: float = 0.0) -> None:
        self.data_dir = Path(data_dir)
        self.ttl_s = float(ttl_s)
        self.jobs_dir = self.data_dir / "jobs"
        self.jobs_dir.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(self.data_dir / "jobs.sqlite3", check_same_thread=False, isolation_level=None)
        self._db.row_factory = sqlite3.Row
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.execute("PRAGMA busy_timeout=5000")
        self._db.executescript(_SCHEMA)

    def close(self) -> None:
        with self._lock:
            self._db.close()

    # ---------------------------------------------------------------- paths
    def job_dir(self, job_id: str) -> Path:
        return self.jobs_dir / job_id

    def result_path(self, job_id: str) -> Path:
        return self.job_dir(job_id) / "result.json"

    def input_dir(self, job_id: str) -> Path:
        return self.job_dir(job_id) / "input"

    def pages_dir(self, job_id: str) -> Path:
        """Pages a running job has finished (kept for a resume until the job ends)."""
        return self.job_dir(job_id) / "pages"

    def new_id(self) -> str:
        return uuid.uuid4().hex

    # ---------------------------------------------------------------- writes
    def add(self, job_id: str, key: str, filename: str, input_path: Path, pages: str | None, pages_total: int) -> Job:
        now = time.time()
        with self._lock:
            self._db.execute(
                "INSERT INTO jobs (id, key, status, filename, input_path, pages, pages_total, created) "
                "VALUES (?, ?, 'queued', ?, ?, ?, ?, ?)",
                (job_id, key, filename, str(input_path), pages, pages_total, now),
            )
        job = self.get(job_id)
        assert job is not None
        return job

    def claim(self) -> dict[str, Any] | None:
        """Take the oldest queued job and mark it running; None when the queue is empty."""
        with self._lock:
            row = self._db.execute(
                "UPDATE jobs SET status='running', started=?, attempts=attempts+1, pages_done=0, pages_failed=0 "
                "WHERE id = (SELECT id FROM jobs WHERE status='queued' ORDER BY created LIMIT 1) RETURNING *",
                (time.time(),),
            ).fetchone()
        return dict(row) if row else None

    def progress(self, job_id: str, pages_done: int, pages_failed: int) -> None:
        with self._lock:
            self._db.execute(
                "UPDATE jobs SET pages_done=?, pages_failed=? WHERE id=? AND status='running'",
                (pages_done, pages_failed, job_id),
            )

    def finish(
        self,
        job_id: str,
        status: JobStatus,
        error: str | None = None,
        pages_done: int | None = None,
        pages_failed: int | None = None,
    ) -> bool:
        """Mark the job finished; False when it is gone (deleted meanwhile)."""
        with self._lock:
            cur = self._db.execute(
                "UPDATE jobs SET status=?, error=?, finished=?, pages_done=COALESCE(?, pages_done), "
                "pages_failed=COALESCE(?, pages_failed) WHERE id=?",
                (status, error, time.time(), pages_done, pages_failed, job_id),
            )
            return cur.rowcount > 0

    def drop_input(self, job_id: str) -> None:
        """A finished job's upload is not needed any more (its result is what is kept)."""
        shutil.rmtree(self.input_dir(job_id), ignore_errors=True)

    def requeue(self, job_id: str) -> None:
        with self._lock:
            self._db.execute("UPDATE jobs SET status='queued', started=NULL WHERE id=? AND status='running'", (job_id,))

    def recover(self) -> int:
        """Jobs left running by a stopped service go back to the queue; returns how many."""
        with self._lock:
            cur = self._db.execute("UPDATE jobs SET status='queued', started=NULL WHERE status='running'")
            return cur.rowcount

    def delete(self, job_id: str) -> bool:
        with self._lock:
            cur = self._db.execute("DELETE FROM jobs WHERE id=?", (job_id,))
        shutil.rmtree(self.job_dir(job_id), ignore_errors=True)
        return cur.rowcount > 0

    # ---------------------------------------------------------------- retention
    def expire(self, now: float | None = None, batch: int = 500) -> int:
        """Remove finished jobs older than the TTL (rows, then folders); returns how many. Never touches
        queued or running jobs. Rows go in batches, so the lock is never held long."""
        if self.ttl_s <= 0:
            return 0
        cutoff = (time.time() if now is None else now) - self.ttl_s
        total = 0
        while True:
            with self._lock:
                ids = [
                    r[0]
                    for r in self._db.execute(
                        "DELETE FROM jobs WHERE id IN (SELECT id FROM jobs WHERE status IN ('done', 'failed') "
                        "AND finished IS NOT NULL AND finished <= ? LIMIT ?) RETURNING id",
                        (cutoff, batch),
                    ).fetchall()
                ]
            for job_id in ids:
                shutil.rmtree(self.job_dir(job_id), ignore_errors=True)
            total += len(ids)
            if len(ids) < batch:
                return total

    def tidy(self) -> tuple[int, int]:
        """At startup, before any request or job runs: remove job folders that have no row (a service
        stopped mid-submission or mid-deletion) and inputs of finished jobs (a service stopped right after
        a job finished), with the pages kept for a resume. Returns (orphan folders removed, inputs removed)."""
        with self._lock:
            status = dict(self._db.execute("SELECT id, status FROM jobs").fetchall())
        orphans = inputs = 0
        for d in self.jobs_dir.iterdir():
            if not (d.is_dir() and _JOB_ID.fullmatch(d.name)):
                continue
            st = status.get(d.name)
            if st is None:
                shutil.rmtree(d, ignore_errors=True)
                orphans += 1
            elif st in FINISHED:
                if self.input_dir(d.name).exists():
                    self.drop_input(d.name)
                    inputs += 1
                shutil.rmtree(self.pages_dir(d.name), ignore_errors=True)
        return orphans, inputs

    def _expired(self, row: sqlite3.Row) -> bool:
        return (
            self.ttl_s > 0
            and row["status"] in FINISHED
            and row["finished"] is not None
            and row["finished"] <= time.time() - self.ttl_s
        )

    # ---------------------------------------------------------------- reads
    def get(self, job_id: str, key: str | None = None) -> Job | None:
        with self._lock:
            row = self._db.execute("SELECT * FROM jobs WHERE id=?", (job_id,)).fetchone()
        if row is None or (key is not None and row["key"] != key) or self._expired(row):
            return None  # an expired job is gone, even before the sweep removes it
        return Job.model_validate({k: row[k] for k in row.keys() if k in Job.model_fields})

    def owner(self, job_id: str) -> str | None:
        with self._lock:
            row = self._db.execute("SELECT key, status, finished FROM jobs WHERE id=?", (job_id,)).fetchone()
        return row["key"] if row and not self._expired(row) else None

    def count(self, status: tuple[str, ...] = ("queued", "running"), key: str | None = None) -> int:
        marks = ",".join("?" for _ in status)
        sql = f"SELECT COUNT(*) FROM jobs WHERE status IN ({marks})"
        args: list[Any] = list(status)
        if key is not None:
            sql += " AND key=?"
            args.append(key)
        with self._lock:
            return int(self._db.execute(sql, args).fetchone()[0])
