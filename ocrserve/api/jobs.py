"""Persistent jobs: one SQLite database (WAL) plus a folder per job under the data directory.

    DATA/jobs.sqlite3            the jobs table
    DATA/jobs/<id>/input/<name>  the uploaded document (removed once the job has finished)
    DATA/jobs/<id>/result.json   the Document JSON once the job is done
    DATA/jobs/<id>/job.json      the finished job's row (so a database restored from a backup gets it back)
    DATA/jobs/<id>/images/       its figure crops (GET /v1/jobs/<id>/images/<name>)
    DATA/jobs/<id>/pages/, doc/  while it runs: finished pages (for a resume), the conversion's folder

A job goes queued -> running -> done | failed. A service that stops (even killed) leaves its running
jobs as `running`; `JobStore.recover()` at start puts them back to `queued`, so none is lost.

Retention: a finished job (done or failed) is kept `ttl_s` seconds after it finished, then it is
expired: `get()` no longer sees it at once, and `expire()` (the service's periodic sweep) removes its
row and folder. Queued and running jobs never expire. `tidy()` (at startup) removes what a stopped
service may have left (inputs of finished jobs, folders of submissions that never got a row) and never a
finished result: a folder with a result but no row (the database restored from a backup, or lost) is
adopted again from its `job.json`, or left as it is.

Every method is blocking (SQLite, files): the service calls them in a thread, never on its event loop.
"""

from __future__ import annotations

import json
import logging
import os
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
# what a job's folder holds (JobStore.job_path)
JobPart = Literal["job.json", "input", "result.json", "images", "doc", "pages"]

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
    bytes INTEGER NOT NULL DEFAULT 0,
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
# the columns job.json keeps (never the input's path: that is where the folder is now)
_META: tuple[str, ...] = ("id", "key", "filename", "pages", "pages_total", "pages_done", "pages_failed")
_META += ("attempts", "bytes", "error", "created", "started", "finished")
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
    """Thread-safe access to the jobs table (a connection for writes and one for reads, each with its lock;
    every call is short unless another process holds the database locked: then a write waits up to 5 s).

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
        if "bytes" not in {r[1] for r in self._db.execute("PRAGMA table_info(jobs)")}:  # a database made before
            self._db.execute("ALTER TABLE jobs ADD COLUMN bytes INTEGER NOT NULL DEFAULT 0")
        # reads have a connection of their own: in WAL mode they go on while another process (or a write
        # of ours, waiting up to busy_timeout for it) holds the write lock
        self._rlock = threading.Lock()
        self._rdb = sqlite3.connect(self.data_dir / "jobs.sqlite3", check_same_thread=False, isolation_level=None)
        self._rdb.row_factory = sqlite3.Row
        self._rdb.execute("PRAGMA busy_timeout=5000")

    def close(self) -> None:
        with self._lock:
            self._db.close()
        with self._rlock:
            self._rdb.close()

    # ---------------------------------------------------------------- paths
    def job_dir(self, job_id: str) -> Path:
        return self.jobs_dir / job_id

    def job_path(self, job_id: str, part: JobPart) -> Path:
        """A part of a job's folder: job.json (its record), input (its upload), result.json (the finished
        Document), images (its figure crops), doc (where a running job's conversion writes its document folder;
        its figure crops go to images), pages (pages a running job has finished, kept for a resume until the
        job ends)."""
        return self.job_dir(job_id) / part

    def new_id(self) -> str:
        return uuid.uuid4().hex

    # ---------------------------------------------------------------- writes
    def add(
        self, job_id: str, key: str, filename: str, input_path: Path, pages: str | None, pages_total: int, size: int = 0
    ) -> Job:
        now = time.time()
        with self._lock:
            self._db.execute(
                "INSERT INTO jobs (id, key, status, filename, input_path, pages, pages_total, bytes, created) "
                "VALUES (?, ?, 'queued', ?, ?, ?, ?, ?, ?)",
                (job_id, key, filename, str(input_path), pages, pages_total, size, now),
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
        shutil.rmtree(self.job_path(job_id, "input"), ignore_errors=True)

    def requeue(self, job_id: str) -> None:
        with self._lock:
            self._db.execute("UPDATE jobs SET status='queued', started=NULL WHERE id=? AND status='running'", (job_id,))

    def recover(self) -> int:
        """Jobs left running by a stopped service go back to the queue; returns how many."""
        with self._lock:
            cur = self._db.execute("UPDATE jobs SET status='queued', started=NULL WHERE status='running'")
            return cur.rowcount

    def delete(self, job_id: str) -> bool:
        """The job's folder first, then its row: on a full disk, SQLite needs the room the folder frees."""
        shutil.rmtree(self.job_dir(job_id), ignore_errors=True)
        with self._lock:
            cur = self._db.execute("DELETE FROM jobs WHERE id=?", (job_id,))
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

    def tidy(self) -> dict[str, int]:
        """At startup, before any request or job runs: a job folder without a row is adopted again when it
        holds a finished result and its `job.json` (a database restored from a backup), kept as it is when
        it holds a result only, and removed otherwise (a service stopped mid-submission or mid-deletion);
        inputs of finished jobs (a service stopped right after a job finished) go, with the pages kept for a
        resume. Returns how many folders were removed, adopted, kept, and inputs removed."""
        with self._lock:
            status = dict(self._db.execute("SELECT id, status FROM jobs").fetchall())
        n = {"removed": 0, "adopted": 0, "kept": 0, "inputs": 0}
        for d in self.jobs_dir.iterdir():
            if not (d.is_dir() and _JOB_ID.fullmatch(d.name)):
                continue
            st = status.get(d.name)
            if st is None and self.job_path(d.name, "result.json").is_file():
                st = "done" if self._adopt(d.name) else None
                n["adopted" if st else "kept"] += 1
                if st is None:
                    continue
            if st is None:
                shutil.rmtree(d, ignore_errors=True)
                n["removed"] += 1
            elif st in FINISHED:
                if self.job_path(d.name, "input").exists():
                    self.drop_input(d.name)
                    n["inputs"] += 1
                shutil.rmtree(self.job_path(d.name, "pages"), ignore_errors=True)
                shutil.rmtree(self.job_path(d.name, "doc"), ignore_errors=True)
        return n

    def _adopt(self, job_id: str) -> bool:
        """A finished job's row again, from the `job.json` written beside its result; False without one."""
        try:
            meta = json.loads(self.job_path(job_id, "job.json").read_text(encoding="utf-8"))
            row = {k: meta[k] for k in _META if k in meta}
            if row.get("id") != job_id or not isinstance(row.get("key"), str) or "filename" not in row:
                return False
            row.update(status="done", input_path=str(self.job_path(job_id, "input") / str(row["filename"])))
            row.setdefault("created", row.get("finished") or time.time())
            with self._lock:
                self._db.execute(
                    f"INSERT OR IGNORE INTO jobs ({', '.join(row)}) VALUES ({', '.join('?' for _ in row)})",
                    list(row.values()),
                )
        except (OSError, ValueError, TypeError, sqlite3.Error) as e:
            log.warning("job %s: a result without a row, kept as it is (%s)", job_id, e)
            return False
        return True

    def write_meta(self, job_id: str, fields: dict[str, Any]) -> None:
        """The finished job's row beside its result (atomic), for `tidy` to adopt it again."""
        tmp = self.job_path(job_id, "job.json").with_suffix(".tmp")
        tmp.write_text(json.dumps({k: fields[k] for k in _META if k in fields}), encoding="utf-8")
        os.replace(tmp, self.job_path(job_id, "job.json"))

    def ping(self) -> None:
        """Raises (sqlite3.Error) unless the jobs table can be read."""
        with self._rlock:
            self._rdb.execute("SELECT 1 FROM jobs LIMIT 1").fetchall()

    def _expired(self, row: sqlite3.Row) -> bool:
        return (
            self.ttl_s > 0
            and row["status"] in FINISHED
            and row["finished"] is not None
            and row["finished"] <= time.time() - self.ttl_s
        )

    # ---------------------------------------------------------------- reads
    def get(self, job_id: str, key: str | None = None) -> Job | None:
        with self._rlock:
            row = self._rdb.execute("SELECT * FROM jobs WHERE id=?", (job_id,)).fetchone()
        if row is None or (key is not None and row["key"] != key) or self._expired(row):
            return None  # an expired job is gone, even before the sweep removes it
        return Job.model_validate({k: row[k] for k in row.keys() if k in Job.model_fields})

    def owner(self, job_id: str) -> str | None:
        with self._rlock:
            row = self._rdb.execute("SELECT key, status, finished FROM jobs WHERE id=?", (job_id,)).fetchone()
        return row["key"] if row and not self._expired(row) else None

    def queued_bytes(self, key: str) -> int:
        """Bytes of uploads the key has in unfinished jobs (queued or running)."""
        with self._rlock:
            row = self._rdb.execute(
                "SELECT COALESCE(SUM(bytes), 0) FROM jobs WHERE key=? AND status IN ('queued', 'running')", (key,)
            ).fetchone()
        return int(row[0])

    def count(self, status: tuple[str, ...] = ("queued", "running"), key: str | None = None) -> int:
        marks = ",".join("?" for _ in status)
        sql = f"SELECT COUNT(*) FROM jobs WHERE status IN ({marks})"
        args: list[Any] = list(status)
        if key is not None:
            sql += " AND key=?"
            args.append(key)
        with self._rlock:
            return int(self._rdb.execute(sql, args).fetchone()[0])
