"""The job store under faults (issue #29, item 12), through a real `ocrserve api` process: another process
holding SQLite's write lock, the jobs table lost, and a database restored from a backup."""

from __future__ import annotations

import shutil
import sqlite3

import httpx

from tests.fakes.standin import StandIn
from tests.support.api import KEYS, ApiProcess, wait_job
from tests.support.helpers import text_pdf, until

ENV = {
    "OCRSERVE_MODEL": "chandra-1",
    "OCRSERVE_API_KEYS": KEYS[0],
    "OCRSERVE_JOB_WORKERS": "2",
    "OCRSERVE_FALLBACK": "false",
    "OCRSERVE_RENDER_WORKERS": "1",
}
H = {"Authorization": f"Bearer {KEYS[0]}"}


def _is_problem(r: httpx.Response, status: int, code: str) -> None:
    assert r.status_code == status, (r.status_code, r.text)
    assert r.headers["content-type"].startswith("application/json"), r.headers
    assert r.json()["code"] == code and r.json()["detail"], r.json()


def test_a_locked_store_kills_no_worker_and_readiness_tells_the_truth(standin: StandIn, tmp_path) -> None:
    pdf = text_pdf(tmp_path / "a.pdf", pages=1, title="Locked")
    data = tmp_path / "data"
    api = ApiProcess(standin.url, data, ENV).start()
    try:
        c = httpx.Client(base_url=api.url, timeout=30, headers=H)
        assert c.get("/readyz").status_code == 200
        lock = sqlite3.connect(data / "jobs.sqlite3", isolation_level=None, timeout=30)
        lock.execute("BEGIN IMMEDIATE")  # another process holds the write lock (a backup, an operator's shell)
        try:

            def not_ready():
                # the process answers at once meanwhile (the claims wait on SQLite in threads, not on the loop)
                assert c.get("/healthz", timeout=4).json() == {"status": "ok"}
                r = c.get("/readyz")
                return r if r.status_code == 503 else None

            r = until(not_ready, "/readyz saying not ready while the job store is locked")
            assert any("job store" in p for p in r.json()["problems"]), r.json()
            # a submission that cannot be recorded is a JSON problem, its upload gone
            _is_problem(c.post("/v1/jobs", files={"file": ("a.pdf", pdf.read_bytes())}), 503, "store_unavailable")
            assert not list((data / "jobs").iterdir())
        finally:
            lock.execute("ROLLBACK")
            lock.close()
        # the workers lived through it: ready again, and a job submitted now is converted
        until(lambda: c.get("/readyz").status_code == 200, "/readyz ready again once the lock is gone")
        r = c.post("/v1/jobs", files={"file": ("a.pdf", pdf.read_bytes())})
        assert r.status_code == 202, r.text
        assert wait_job(c, r.json()["id"])["status"] == "done"
        assert "job store failed" in api.log()  # it was said, not silent
        assert 'ocrserve_failures_total{kind="store"}' in c.get("/metrics").text
    finally:
        api.stop()


def test_a_lost_jobs_table_answers_json_problems_and_metrics_still_answer(standin: StandIn, tmp_path) -> None:
    data = tmp_path / "data"
    api = ApiProcess(standin.url, data, ENV).start()
    try:
        c = httpx.Client(base_url=api.url, timeout=30, headers=H)
        with sqlite3.connect(data / "jobs.sqlite3") as db:
            db.execute("DROP TABLE jobs")
        m = c.get("/metrics")
        assert m.status_code == 200 and "ocrserve_queue_depth NaN" in m.text, m.text[:300]
        _is_problem(c.get("/v1/jobs/" + "0" * 32), 503, "store_unavailable")
        _is_problem(c.get("/v1/jobs/" + "0" * 32 + "/result"), 503, "store_unavailable")
        _is_problem(c.delete("/v1/jobs/" + "0" * 32), 503, "store_unavailable")
        r = c.get("/readyz")
        assert r.status_code == 503 and any("no such table" in p for p in r.json()["problems"]), r.json()
        assert c.get("/healthz").status_code == 200
    finally:
        api.stop()


def test_a_database_restored_from_a_backup_destroys_no_result(standin: StandIn, tmp_path) -> None:
    pdf = text_pdf(tmp_path / "a.pdf", pages=2, title="Backup")
    data = tmp_path / "data"
    backup = tmp_path / "backup.sqlite3"
    api = ApiProcess(standin.url, data, ENV).start()
    try:
        c = httpx.Client(base_url=api.url, timeout=30, headers=H)
        with sqlite3.connect(data / "jobs.sqlite3") as src, sqlite3.connect(backup) as dst:
            src.backup(dst)  # the nightly backup, before the job
        job = c.post("/v1/jobs", files={"file": ("a.pdf", pdf.read_bytes())}).json()["id"]
        assert wait_job(c, job)["status"] == "done"
        md = c.get(f"/v1/jobs/{job}/result?format=md").text
    finally:
        api.stop()
    # the database is restored from that backup: it has no row for the job
    for suffix in ("", "-wal", "-shm"):
        (data / f"jobs.sqlite3{suffix}").unlink(missing_ok=True)
    shutil.copyfile(backup, data / "jobs.sqlite3")
    stray = data / "jobs" / ("f" * 32)  # a result with no record of its job at all
    stray.mkdir(parents=True)
    (stray / "result.json").write_text("{}", encoding="utf-8")
    api2 = ApiProcess(standin.url, data, ENV, log_path=tmp_path / "second.log").start()
    try:
        c = httpx.Client(base_url=api2.url, timeout=30, headers=H)
        j = c.get(f"/v1/jobs/{job}")
        assert j.status_code == 200 and j.json()["status"] == "done" and j.json()["pages_done"] == 2, j.text
        assert c.get(f"/v1/jobs/{job}/result?format=md").text == md
        assert (stray / "result.json").is_file()  # kept as it is, never deleted by the tidy-up
        assert "adopted again" in api2.log() and "kept as they are" in api2.log()
    finally:
        api2.stop()
