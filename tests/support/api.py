"""The OCR HTTP API as the tests run it: a real `ocrserve api` process (uvicorn) in its own process group,
shared per pytest session in front of the stand-in vLLM server (tests/conftest.py exposes `api`, `api_fb`
and `docs` as fixtures), and helpers for its answers (SSE events, jobs)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from tests.fakes.standin import StandIn
from tests.support.helpers import blank_pdf, image, text_pdf

ROOT = Path(__file__).resolve().parents[2]
KEYS = ["key-alpha", "key-beta", "key-gamma", "key-delta"]
MAX_UPLOAD = 3_000_000
MAX_PAGES = 20
PER_KEY = 3


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ApiProcess:
    """`ocrserve api` as a subprocess in its own process group (so its render workers go with it)."""

    def __init__(
        self,
        server: str | None,
        data_dir: Path,
        env: dict[str, str] | None = None,
        log_path: Path | None = None,
        engine: str | None = None,
    ):
        self.server, self.data_dir, self.extra_env, self.engine = server, data_dir, env or {}, engine
        self.log_path = log_path or data_dir.parent / f"{data_dir.name}.log"
        self.proc: subprocess.Popen | None = None
        self.port = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 60.0) -> ApiProcess:
        self.port = free_port()
        env = {**os.environ, "PYTHONPATH": str(ROOT), **self.extra_env}
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "ocrserve.cli",
                    "api",
                    "--port",
                    str(self.port),
                    "--host",
                    "127.0.0.1",
                    "--data-dir",
                    str(self.data_dir),
                ]
                + (["--server", self.server] if self.server else [])
                + (["--engine", self.engine] if self.engine else []),
                cwd=ROOT,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"ocrserve api exited with {self.proc.returncode}: {self.log()[-3000:]}")
            try:
                if httpx.get(self.url + "/healthz", timeout=1).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"ocrserve api did not answer /healthz: {self.log()[-3000:]}")

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def kill(self, sig: int = signal.SIGKILL) -> None:
        """Signal the whole process group (the server and its render workers)."""
        if self.proc is None:
            return
        try:
            os.killpg(self.proc.pid, sig)
        except ProcessLookupError:
            pass
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=5)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.kill(signal.SIGTERM)
        if self.proc is not None:  # workers left behind by a killed server
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None


API_ENV = {
    "OCRSERVE_MODEL": "chandra-1",  # the stand-in answers as Chandra 1 ([x0, y0, x1, y1] of 1024)
    "OCRSERVE_API_KEYS": ",".join(KEYS),
    "OCRSERVE_MAX_UPLOAD_BYTES": str(MAX_UPLOAD),
    "OCRSERVE_MAX_PAGES": str(MAX_PAGES),
    "OCRSERVE_PER_KEY_CONCURRENCY": str(PER_KEY),
    "OCRSERVE_JOB_WORKERS": "4",
    "OCRSERVE_RENDER_WORKERS": "2",
    "OCRSERVE_FALLBACK": "false",
}
_SHARED: dict[str, ApiProcess] = {}


def shared_api(name: str, standin: StandIn, env: dict[str, str], tmp_path_factory, request) -> ApiProcess:
    """One API process of this name per pytest session in front of the session's stand-in."""
    proc = _SHARED.get(name)
    if proc is None or not proc.alive() or proc.server != standin.url:
        if proc is not None:
            proc.stop()
        data = tmp_path_factory.mktemp(name) / "data"
        proc = ApiProcess(standin.url, data, env).start()
        _SHARED[name] = proc
        request.config.add_cleanup(proc.stop)
    return proc


def open_api(name: str, **knobs: object):
    """A fixture (named `name`) of the session's API process `name` without keys (every client shares the key
    "open"), one render worker and no fallback, and these Settings knobs (OCRSERVE_<KNOB>)."""
    env = {"OCRSERVE_API_KEYS": "", "OCRSERVE_RENDER_WORKERS": "1", "OCRSERVE_FALLBACK": "false"}
    env |= {f"OCRSERVE_{k.upper()}": str(v) for k, v in knobs.items()}

    @pytest.fixture(name=name)
    def api(standin: StandIn, tmp_path_factory, request) -> ApiProcess:
        return shared_api(name, standin, env, tmp_path_factory, request)

    return api


def H(key: str = KEYS[0]) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def make_docs(d: Path) -> dict[str, Path]:
    """The documents the API tests upload, written into `d` (the `docs` fixture)."""
    return {
        "pdf3": text_pdf(d / "three.pdf", pages=3, title="Report"),
        "pdf1": text_pdf(d / "one.pdf", pages=1, title="Memo"),
        "png": image(d / "scan.png", size=(640, 480), text="Scan"),
        "many": blank_pdf(d / "many.pdf", pages=MAX_PAGES + 5),
        "bad": _write(d / "notes.pdf", b"these are plain words, not a PDF at all\n" * 20),
        "big": _write(d / "big.pdf", b"%PDF-1.4\n" + os.urandom(MAX_UPLOAD + 1000)),
    }


def _write(p: Path, data: bytes) -> Path:
    p.write_bytes(data)
    return p


def parse_sse(text: str) -> list[tuple[str, dict]]:
    events = []
    for chunk in text.replace("\r\n", "\n").split("\n\n"):
        kind, data = None, []
        for line in chunk.split("\n"):
            if line.startswith("event:"):
                kind = line[6:].strip()
            elif line.startswith("data:"):
                data.append(line[5:].strip())
        if kind and data:
            events.append((kind, json.loads("\n".join(data))))
    return events


def page_events(events: list[tuple[str, dict]], page: int) -> list[tuple[str, dict]]:
    return [(k, d) for k, d in events if d.get("page") == page]


def wait_job(c: httpx.Client, job_id: str, timeout: float = 60.0, headers=None) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        j = c.get(f"/v1/jobs/{job_id}", headers=headers).json()
        if j["status"] in ("done", "failed"):
            return j
        time.sleep(0.1)
    raise AssertionError(f"job {job_id} not finished: {j}")
