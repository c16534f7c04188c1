"""A full data disk (#29.11), through a real `ocrserve api` process: answers are JSON 507 problems (not
text/plain 500s), DELETE frees space (the folder goes before the row, which SQLite needs room for), and
a job whose result cannot be written ends `failed` with the reason instead of staying `running`.

The disk is simulated (sitecustomize in the API's processes): while a file named `ballast` is anywhere
under the data folder, every write there (files, folders, SQLite's INSERT/UPDATE/DELETE) fails as a
full disk fails: ENOSPC, "database or disk is full"."""

from __future__ import annotations

import os
from pathlib import Path

import httpx

from tests.fakes.standin import StandIn
from tests.support.api import KEYS, ROOT, ApiProcess, wait_job
from tests.support.helpers import text_pdf, until

SHIM = """
import builtins, errno, glob, io, os, sqlite3
DATA = os.environ["FULL_DISK_DATA"]

def full(path=None):
    if path is not None and not os.path.abspath(os.fsdecode(path)).startswith(DATA):
        return False
    return bool(glob.glob(os.path.join(DATA, "**", "ballast"), recursive=True))

def _enospc(path):
    return OSError(errno.ENOSPC, "No space left on device", os.fsdecode(path))

_open = builtins.open
def _guarded_open(file, mode="r", *a, **kw):
    if isinstance(file, (str, bytes, os.PathLike)) and any(c in mode for c in "wax+") and full(file):
        raise _enospc(file)
    return _open(file, mode, *a, **kw)
builtins.open = io.open = _guarded_open

_mkdir = os.mkdir
def _guarded_mkdir(path, *a, **kw):
    if full(path):
        raise _enospc(path)
    return _mkdir(path, *a, **kw)
os.mkdir = _guarded_mkdir

class _Full(sqlite3.Connection):
    def execute(self, sql, *a):
        if sql.lstrip().split(None, 1)[0].upper() in ("INSERT", "UPDATE", "DELETE", "REPLACE") and full():
            raise sqlite3.OperationalError("database or disk is full")
        return super().execute(sql, *a)

_connect = sqlite3.connect
def _guarded_connect(*a, **kw):
    kw.setdefault("factory", _Full)
    return _connect(*a, **kw)
sqlite3.connect = _guarded_connect
"""

ENV = {
    "OCRSERVE_MODEL": "chandra-1",
    "OCRSERVE_API_KEYS": KEYS[0],
    "OCRSERVE_JOB_WORKERS": "1",
    "OCRSERVE_FALLBACK": "false",
    "OCRSERVE_RENDER_WORKERS": "1",
}
H = {"Authorization": f"Bearer {KEYS[0]}"}


def _full_disk_problem(r: httpx.Response) -> None:
    assert r.status_code == 507, (r.status_code, r.text)
    assert r.headers["content-type"].startswith("application/json"), r.headers
    assert r.json()["code"] == "insufficient_storage" and "disk is full" in r.json()["detail"], r.json()


def test_a_full_data_disk(standin: StandIn, tmp_path: Path) -> None:
    shim = tmp_path / "shim"
    shim.mkdir()
    (shim / "sitecustomize.py").write_text(SHIM)
    data = tmp_path / "data"
    env = {**ENV, "FULL_DISK_DATA": str(data), "PYTHONPATH": os.pathsep.join([str(shim), str(ROOT)])}
    pdf = text_pdf(tmp_path / "a.pdf", pages=1, title="Full")
    api = ApiProcess(standin.url, data, env).start()
    try:
        c = httpx.Client(base_url=api.url, timeout=30, headers=H)
        done = c.post("/v1/jobs", files={"file": ("a.pdf", pdf.read_bytes())}).json()["id"]
        assert wait_job(c, done)["status"] == "done"
        ballast = data / "jobs" / done / "ballast"  # the finished job's files fill the disk
        ballast.write_bytes(b"x")
        # a submission: a JSON 507 that says so, not a text/plain 500
        _full_disk_problem(c.post("/v1/jobs", files={"file": ("a.pdf", pdf.read_bytes())}))
        _full_disk_problem(c.post("/v1/convert", files={"file": ("a.pdf", pdf.read_bytes())}))
        # DELETE of the finished job frees the space, though SQLite could not write before it
        r = c.delete(f"/v1/jobs/{done}")
        assert r.status_code == 200 and r.json()["deleted"] is True, r.text
        assert not ballast.exists() and c.get(f"/v1/jobs/{done}").status_code == 404
        # a job whose own upload filled the disk while it ran: its result cannot be written, and it
        # ends failed with the reason (what it held freed first, so that its end can be recorded)
        standin.control(delay_s=3.0)
        asked = standin.stats()["total_requests"]
        job = c.post("/v1/jobs", files={"file": ("a.pdf", pdf.read_bytes())}).json()["id"]
        # the page is with the model (3 s): the disk fills while the job runs, before its result is written
        until(lambda: standin.stats()["total_requests"] > asked, "the job's page sent to the model", timeout=60)
        (data / "jobs" / job / "input" / "ballast").write_bytes(b"x")
        end = wait_job(c, job, timeout=40)
        assert end["status"] == "failed", end
        assert "cannot write the result: No space left on device" in end["error"], end
        assert c.get("/readyz").status_code == 200  # the disk has room again: nothing stays wedged
    finally:
        api.stop()
