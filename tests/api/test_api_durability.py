"""Jobs survive the service: SIGKILL mid-job, restart on the same data directory, the job completes
without converting again the pages it had finished."""

from __future__ import annotations

import signal
import sqlite3
import time

import httpx

from tests.fakes.standin import StandIn
from tests.support.api import KEYS, ApiProcess
from tests.support.helpers import text_pdf

ENV = {
    "OCRSERVE_API_KEYS": KEYS[0],
    "OCRSERVE_JOB_WORKERS": "1",
    "OCRSERVE_FALLBACK": "false",
    "OCRSERVE_RENDER_WORKERS": "1",
}
H = {"Authorization": f"Bearer {KEYS[0]}"}


def test_sigkill_mid_job_then_restart_completes_every_page(standin: StandIn, tmp_path) -> None:
    pages = 5
    pdf = text_pdf(tmp_path / "long.pdf", pages=pages, title="Durable")
    # slow engine, one page at a time: the job is surely mid-way when the service dies
    standin.control(delay_s=0.4, max_concurrency=1)
    data = tmp_path / "data"
    api = ApiProcess(standin.url, data, ENV).start()
    try:
        c = httpx.Client(base_url=api.url, timeout=30, headers=H)
        with open(pdf, "rb") as f:
            r = c.post("/v1/jobs", files={"file": ("long.pdf", f)})
        assert r.status_code == 202
        job_id = r.json()["id"]
        queued = c.post("/v1/jobs", files={"file": ("long.pdf", pdf.read_bytes())}).json()["id"]
        deadline = time.monotonic() + 30
        while True:
            j = c.get(f"/v1/jobs/{job_id}").json()
            if j["status"] == "running" and j["pages_done"] >= 1:
                break
            assert time.monotonic() < deadline, j
            time.sleep(0.05)
        api.kill(signal.SIGKILL)
        assert not api.alive()
    finally:
        api.stop()
    # what the killed service left on disk: the job still marked running, the WAL database readable
    with sqlite3.connect(data / "jobs.sqlite3") as db:
        status = dict(db.execute("SELECT id, status FROM jobs").fetchall())
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert status[job_id] == "running" and status[queued] == "queued"
    # the pages it finished are kept for the resume
    kept = sorted(int(f.stem) for f in (data / "jobs" / job_id / "pages").glob("*.json") if f.stem.isdigit())
    assert len(kept) >= 1 and kept == list(range(len(kept)))  # one page at a time, in order

    standin.control(delay_s=0.0, max_concurrency=0)
    time.sleep(0.5)  # a request the killed service left at the stand-in has arrived by now
    requests_before = standin.stats()["total_requests"]
    api2 = ApiProcess(standin.url, data, ENV, log_path=tmp_path / "second.log").start()
    try:
        c = httpx.Client(base_url=api2.url, timeout=30, headers=H)
        for jid in (job_id, queued):
            deadline = time.monotonic() + 60
            while True:
                j = c.get(f"/v1/jobs/{jid}").json()
                if j["status"] in ("done", "failed"):
                    break
                assert time.monotonic() < deadline, j
                time.sleep(0.1)
            assert j["status"] == "done" and j["pages_done"] == pages and j["pages_failed"] == 0, j
            doc = c.get(f"/v1/jobs/{jid}/result").json()
            assert [p["index"] for p in doc["pages"]] == list(range(pages))
            # every page's figure crop is there, those of the pages kept from before the kill too
            figs = [b["figure"] for p in doc["pages"] for b in p["blocks"] if b["figure"]]
            assert len(figs) == pages and all(c.get(f).content.startswith(b"\x89PNG") for f in figs), figs
            assert all(p["status"] == "ok" and p["blocks"] for p in doc["pages"])
        # the resumed job asked the model only for the pages it did not have; the queued one for all
        assert standin.stats()["total_requests"] - requests_before == (pages - len(kept)) + pages
        assert not (data / "jobs" / job_id / "pages").exists()  # a finished job keeps only its result
        first = c.get(f"/v1/jobs/{job_id}").json()
        assert first["attempts"] == 2  # claimed by the killed service, then again after the restart
        assert "resuming 1 job" in api2.log()
    finally:
        api2.stop()


def test_kept_pages_are_reused_only_by_the_same_model_and_engine(tmp_path) -> None:
    import pytest

    from ocrserve.api.worker import _load_pages, _write_page
    from ocrserve.document import Page

    job = tmp_path / "job"
    job.mkdir()
    run = {"model": "chandra-1", "engine": "openai"}
    for i in (0, 2):
        _write_page(job / "pages", Page(index=i, width=10, height=10, status="ok"), run)
    (job / "pages" / "1.json").write_text("{torn")  # a page cut by a kill: converted again
    _write_page(job / "pages", Page(index=3, width=10, height=10, status="fallback"), run)  # asked again
    (job / "pages" / "run.json").unlink()  # a folder without its run.json (a failed write) gets one
    _write_page(job / "pages", Page(index=4, width=10, height=10, status="ok"), run)
    assert sorted(_load_pages(job / "pages", run)) == [0, 2, 4]
    assert _load_pages(job / "pages", {"model": "chandra-2", "engine": "openai"}) == {}
    assert not (job / "pages").exists()  # another model's pages are dropped
    # a job deleted while a page finished: its folder is not made again
    gone = tmp_path / "deleted-job"
    with pytest.raises(OSError):
        _write_page(gone / "pages", Page(index=0, width=10, height=10, status="ok"), run)
    assert not gone.exists()
