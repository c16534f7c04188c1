"""`ocrserve api` keeps its data under the user's data folder by default, never in the working directory,
and says where (issue #29, item 8)."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import httpx

from tests.fakes.standin import StandIn
from tests.support.api import ROOT, free_port


def test_default_data_dir_is_the_users_data_folder_and_is_said(standin: StandIn, tmp_path) -> None:
    cwd, xdg = tmp_path / "work", tmp_path / "xdg"
    cwd.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("OCRSERVE_")}
    env.update(PYTHONPATH=str(ROOT), XDG_DATA_HOME=str(xdg), HOME=str(tmp_path / "home"), OCRSERVE_MODEL="chandra-1")
    port = free_port()
    log = tmp_path / "api.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "ocrserve.cli", "api", "--port", str(port), "--server", standin.url],
            cwd=cwd,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        deadline = time.monotonic() + 60
        while True:
            assert proc.poll() is None, log.read_text()
            try:
                if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.1)
        data = xdg / "ocrserve"
        assert (data / "jobs.sqlite3").is_file()
        assert list(cwd.iterdir()) == []  # nothing in the working directory (a clone's `git status` stays clean)
        said = log.read_text()
        assert f"data in {data}" in said, said
    finally:
        os.killpg(proc.pid, 15)
        proc.wait(timeout=30)
