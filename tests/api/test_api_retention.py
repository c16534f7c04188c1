"""Job retention: finished jobs expire (row and files) after OCRSERVE_JOB_TTL_S; queued and running ones never do.

End to end against a real `ocrserve api` process (its sweep runs every OCRSERVE_JOB_SWEEP_INTERVAL_S and once at
startup), plus the store and the worker's bookkeeping in-process.
"""

from __future__ import annotations

import asyncio
import signal
import sqlite3
import time
import uuid
from pathlib import Path

import httpx

from ocrserve.api.jobs import JobStore
from ocrserve.api.worker import JobWorker
from tests.fakes.standin import StandIn
from tests.support.api import KEYS, ApiProcess
from tests.support.helpers import text_pdf, until

H = {"Authorization": f"Bearer {KEYS[0]}"}
ENV = {
    "OCRSERVE_API_KEYS": KEYS[0],
    "OCRSERVE_JOB_WORKERS": "1",
    "OCRSERVE_FALLBACK": "false",
    "OCRSERVE_RENDER_WORKERS": "1",
}
DAY = 86400.0


def _rows(data: Path) -> dict[str, str]:
    with sqlite3.connect(data / "jobs.sqlite3", timeout=10) as db:
        return dict(db.execute("SELECT id, status FROM jobs").fetchall())


def _sql(data: Path, sql: str, *args) -> None:
    db = sqlite3.connect(data / "jobs.sqlite3", timeout=10)
    try:
        with db:
            db.execute(sql, args)
    finally:
        db.close()


def _metric(c: httpx.Client, name: str) -> float:
    for line in c.get("/metrics").text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[-1])
    raise AssertionError(f"{name} not in /metrics")


def _submit(c: httpx.Client, pdf: Path) -> str:
    r = c.post("/v1/jobs", files={"file": (pdf.name, pdf.read_bytes())})
    assert r.status_code == 202, r.text
    return r.json()["id"]


def _status(c: httpx.Client, job_id: str) -> str | None:
    r = c.get(f"/v1/jobs/{job_id}")
    return r.json()["status"] if r.status_code == 200 else None


def test_finished_jobs_expire_queued_and_running_ones_stay(standin: StandIn, tmp_path) -> None:
    pdf1 = text_pdf(tmp_path / "one.pdf", pages=1, title="Short")
    pdf2 = text_pdf(tmp_path / "two.pdf", pages=2, title="Held")
    data = tmp_path / "data"
    env = {**ENV, "OCRSERVE_JOB_TTL_S": "1", "OCRSERVE_JOB_SWEEP_INTERVAL_S": "0.2"}
    api = ApiProcess(standin.url, data, env).start()
    try:
        c = httpx.Client(base_url=api.url, timeout=30, headers=H)
        spec = c.get("/openapi.json").json()
        assert "404" in spec["paths"]["/v1/jobs/{job_id}"]["get"]["responses"]
        assert "expired" in spec["paths"]["/v1/jobs/{job_id}"]["get"]["description"]

        done = _submit(c, pdf1)
        until(lambda: _status(c, done) != "queued" and _status(c, done) != "running")
        # the engine now holds every answer: the next job stays running, the one after it queued
        standin.control(delay_s=30)
        running, queued = _submit(c, pdf2), _submit(c, pdf1)
        until(lambda: _status(c, running) == "running")

        # the finished job expires: its row and its folder go, and the API answers 404
        # a sweep deletes the rows, then the folders: wait for both
        until(lambda: done not in _rows(data) and not (data / "jobs" / done).exists(), timeout=30)
        r = c.get(f"/v1/jobs/{done}")
        assert r.status_code == 404 and "expired" in r.json()["detail"], r.text
        assert c.get(f"/v1/jobs/{done}/result").status_code == 404
        assert _metric(c, "ocrserve_jobs_expired_total") >= 1

        # two whole sweeps after the unfinished jobs are older than the TTL: both are still there
        created = max(c.get(f"/v1/jobs/{j}").json()["created"] for j in (running, queued))
        until(lambda: time.time() > created + 1.0)
        swept = _metric(c, "ocrserve_job_sweeps_total")
        until(lambda: _metric(c, "ocrserve_job_sweeps_total") >= swept + 2, timeout=30)
        assert {k: v for k, v in _rows(data).items() if k in (running, queued)} == {
            running: "running",
            queued: "queued",
        }
        assert _status(c, running) == "running" and _status(c, queued) == "queued"
        for j in (running, queued):  # their inputs are kept until they finish
            assert [p.name for p in (data / "jobs" / j / "input").iterdir()], j

        # released, they finish, lose their inputs, and expire in turn
        standin.reset()
        until(
            lambda: (
                not ({running, queued} & set(_rows(data)))
                and not (data / "jobs" / running).exists()
                and not (data / "jobs" / queued).exists()
            ),
            timeout=60,
        )
        assert sorted(p.name for p in (data / "jobs").iterdir()) == []
    finally:
        api.stop()


def test_restart_sweeps_at_startup_and_keeps_unfinished_jobs(standin: StandIn, tmp_path) -> None:
    pdf = text_pdf(tmp_path / "one.pdf", pages=1, title="Kept")
    data = tmp_path / "data"
    # first service: jobs kept forever (TTL 0)
    api = ApiProcess(standin.url, data, {**ENV, "OCRSERVE_JOB_TTL_S": "0"}).start()
    try:
        c = httpx.Client(base_url=api.url, timeout=30, headers=H)
        old, recent = _submit(c, pdf), _submit(c, pdf)
        for j in (old, recent):
            until(lambda j=j: _status(c, j) == "done")
            # finished: the input is gone at once, the result is kept
            assert not (data / "jobs" / j / "input").exists() and (data / "jobs" / j / "result.json").is_file()
            assert c.get(f"/v1/jobs/{j}/result").status_code == 200
        standin.control(delay_s=30)  # held: this job is running when the service is killed
        unfinished = _submit(c, pdf)
        until(lambda: _status(c, unfinished) == "running")
        api.kill(signal.SIGKILL)
    finally:
        api.stop()
    standin.reset()
    # what a stopped service may leave, and time passing: `old` finished (failed) 8 days ago, the
    # unfinished job was made 8 days ago, a folder without a job, a finished job's input left behind
    now = time.time()
    _sql(data, "UPDATE jobs SET status='failed', finished=? WHERE id=?", now - 8 * DAY, old)
    _sql(data, "UPDATE jobs SET created=?, started=? WHERE id=?", now - 8 * DAY, now - 8 * DAY, unfinished)
    orphan = data / "jobs" / uuid.uuid4().hex
    (orphan / "input").mkdir(parents=True)
    (orphan / "input" / "x.pdf").write_bytes(b"%PDF-1.4\n")
    (data / "jobs" / recent / "input").mkdir()
    (data / "jobs" / recent / "input" / "one.pdf").write_bytes(pdf.read_bytes())
    assert _rows(data) == {old: "failed", recent: "done", unfinished: "running"}

    # second service: default TTL (7 days), a sweep only every hour, so what goes, goes at startup
    api2 = ApiProcess(
        standin.url, data, {**ENV, "OCRSERVE_JOB_SWEEP_INTERVAL_S": "3600"}, log_path=tmp_path / "second.log"
    ).start()
    try:
        c = httpx.Client(base_url=api2.url, timeout=30, headers=H)
        rows = _rows(data)
        assert old not in rows and not (data / "jobs" / old).exists()
        assert not orphan.exists()
        assert not (data / "jobs" / recent / "input").exists() and rows[recent] == "done"
        assert c.get(f"/v1/jobs/{recent}/result").status_code == 200
        assert c.get(f"/v1/jobs/{old}").status_code == 404
        assert "removed 1 expired job" in api2.log()
        assert _metric(c, "ocrserve_jobs_expired_total") == 1
        # the unfinished job survived the startup sweep and completes
        assert rows[unfinished] in ("queued", "running", "done")  # kept (a fast worker may have finished it)
        until(lambda: _status(c, unfinished) == "done")
        # past its TTL a job answers 404 at once, before any sweep has removed it
        _sql(data, "UPDATE jobs SET finished=? WHERE id=?", time.time() - 8 * DAY, recent)
        r = c.get(f"/v1/jobs/{recent}")
        assert r.status_code == 404 and "expired" in r.json()["detail"] and "7 days" in r.json()["detail"]
        assert c.get(f"/v1/jobs/{recent}/result").status_code == 404
        assert c.delete(f"/v1/jobs/{recent}").status_code == 404
        assert recent in _rows(data) and (data / "jobs" / recent / "result.json").exists()
    finally:
        api2.stop()


# ------------------------------------------------------------------------------------------ in-process


def test_store_expire_removes_only_finished_jobs_past_the_ttl(tmp_path) -> None:
    store = JobStore(tmp_path, ttl_s=10)
    try:
        ids = {}
        for name in ("queued", "running", "done", "failed", "fresh"):
            ids[name] = store.new_id()
            inp = store.job_path(ids[name], "input")
            inp.mkdir(parents=True)
            (inp / "a.pdf").write_bytes(b"x")
            store.add(ids[name], "k", "a.pdf", inp / "a.pdf", None, 1)
        assert store.claim()["id"] == ids["queued"]  # the oldest: claimed, so it is running now
        ids["running"], ids["queued"] = ids["queued"], ids["running"]
        for name, status in (("done", "done"), ("failed", "failed"), ("fresh", "done")):
            assert store.finish(ids[name], status)
        t = time.time()
        _sql_store = store._db.execute  # test-only: age two finished jobs and the unfinished ones
        _sql_store("UPDATE jobs SET finished=? WHERE id IN (?, ?)", (t - 60, ids["done"], ids["failed"]))
        _sql_store("UPDATE jobs SET created=? WHERE id IN (?, ?)", (t - 60, ids["queued"], ids["running"]))
        assert store.get(ids["done"]) is None and store.get(ids["fresh"]) is not None  # expired = gone at once
        assert store.expire() == 2
        left = {j: store.get(j).status for j in ids.values() if store.get(j)}
        assert left == {ids["queued"]: "queued", ids["running"]: "running", ids["fresh"]: "done"}
        assert not store.job_dir(ids["done"]).exists() and not store.job_dir(ids["failed"]).exists()
        assert store.job_path(ids["queued"], "input").exists() and store.job_path(ids["running"], "input").exists()
        assert store.expire() == 0
        assert JobStore(tmp_path / "forever", ttl_s=0).expire(now=t + 100 * DAY) == 0
        assert store.finish(uuid.uuid4().hex, "done") is False  # a job that is gone
    finally:
        store.close()


class _HangingService:
    """Converts nothing: every conversion waits until it is cancelled."""

    async def convert(self, checked, on_page=None, known_pages=None, owner="", figures_dir=None):
        await asyncio.Event().wait()


async def test_worker_forgets_a_deleted_job_once_its_cancellation_is_handled(tmp_path) -> None:
    store = JobStore(tmp_path)
    worker = JobWorker(_HangingService(), store, workers=1)  # type: ignore[arg-type]
    try:
        job_id = store.new_id()
        store.add(job_id, "k", "a.pdf", tmp_path / "a.pdf", None, 1)
        worker.start()
        worker.notify()
        for _ in range(200):
            if job_id in worker.running:
                break
            await asyncio.sleep(0.01)
        assert job_id in worker.running
        worker.cancel(job_id)
        store.delete(job_id)
        assert worker.deleted == {job_id}
        for _ in range(200):
            if not worker.running:
                break
            await asyncio.sleep(0.01)
        assert worker.running == {} and worker.deleted == set()
        assert store.get(job_id) is None  # not put back in the queue
        for _ in range(100):  # jobs that are not running leave nothing behind
            worker.cancel(uuid.uuid4().hex)
        assert worker.deleted == set()
    finally:
        await worker.stop()
        store.close()
