"""A stand-in for a vLLM server: a real HTTP process speaking OpenAI chat completions, failing on cue.

Run it by hand:

    python -m tests.fakes.standin --port 8000 [--host 127.0.0.1] [--config '{"delay_s": 0.2}']

or from tests through the `standin` fixture (tests/conftest.py), which starts one
process for the whole pytest session and resets its config and statistics before each test. Code
outside pytest (benchmarks) uses `start_standin(**config)` / `StandIn.stop()`.

Endpoints (as vLLM serves them, plus two for the tests):
  GET  /health, GET /v1/models (id "chandra", max_model_len), GET /metrics (vLLM-named gauges)
  POST /v1/chat/completions  JSON or `stream: true` SSE; the request must be one user message whose
       content is [image_url (data:image/png|jpeg;base64,...), text], else 400 like vLLM.
  POST /_control  set the config (see `StandInConfig`); `{"reset": true}` also clears the stats
  GET  /_stats    requests, attempts per image (sha256 of the decoded image), max in flight, last
                  request's prompt and sampling, a short log of recent requests

The answer is a deterministic Chandra-1 raw output derived from the image: a Section-Header
`<h1>Page {sha256[:12]}</h1>`, Text paragraphs, a Table, inline math, a checkbox, an Image block,
so a test can tell that each page's output came from its own image (`expected_output(png_bytes)`).

Cues, per attempt of each distinct image (`plans` by sha256 prefix, else `default_plan`; once a plan
is used up the answer is "ok"): ok, slow:<seconds>, 500, 503, 400, 429, drop (close the connection
mid-response), loop (a repetition loop up to max_tokens, finish_reason length), cutoff (last block
unterminated, finish_reason length), garbage (text that is no Chandra layout); and the hostile ones:
trickle (an answer that never ends: one piece every `trickle_s` seconds, streamed as SSE events or,
not streaming, as a JSON body one byte at a time, until the client hangs up), huge (`huge_chars` of
varied, loop-free text with finish_reason stop and its honest completion_tokens, far above
max_tokens), overcount (the ok answer, but usage.completion_tokens = max_tokens + 1000), die (the
whole server process exits on the request: a replica that died; later requests are refused).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from tests.fakes.standin_answers import chandra_output as chandra_output
from tests.fakes.standin_answers import expected_output as expected_output
from tests.fakes.standin_answers import make_answer as make_answer
from tests.fakes.standin_app import App
from tests.fakes.standin_config import StandInConfig as StandInConfig


def serve(host: str, port: int, config: StandInConfig, announce=None) -> None:
    """Run the server in this process until killed. `announce(port)` is called once it listens."""
    import uvicorn

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(2048)
    sock.set_inheritable(True)
    actual = sock.getsockname()[1]
    ucfg = uvicorn.Config(
        App(config), log_level="warning", access_log=False, lifespan="on", timeout_keep_alive=5, backlog=2048
    )
    server = uvicorn.Server(ucfg)

    async def main():
        task = asyncio.create_task(server.serve(sockets=[sock]))
        while not server.started and not task.done():
            await asyncio.sleep(0.01)
        if announce:
            announce(actual)
        await task

    asyncio.run(main())


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m tests.fakes.standin", description="stand-in vLLM server")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=8000, help="0 = any free port (printed on stdout)")
    ap.add_argument("--config", default="{}", help="initial config as JSON (see StandInConfig)")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    config = StandInConfig.model_validate(json.loads(args.config))

    def announce(port: int) -> None:
        print(f"STANDIN_PORT={port}", flush=True)

    serve(args.host, args.port, config, announce)


# ------------------------------------------------------------------------------ test-side handle


class StandIn:
    """A running stand-in process: base URL, control, stats, stop."""

    def __init__(self, proc: subprocess.Popen, port: int, host: str = "127.0.0.1", log_path: str | None = None):
        self.proc, self.port, self.host, self.log_path = proc, port, host, log_path
        self.root = f"http://{host}:{port}"
        self.url = self.root + "/v1"

    def _request(self, method: str, path: str, payload: dict | None = None) -> Any:
        import httpx

        r = httpx.request(method, self.root + path, json=payload, timeout=30)
        if r.status_code != 200:
            raise RuntimeError(f"stand-in {method} {path} answered {r.status_code}: {r.text}")
        return r.json()

    def control(self, **cfg: Any) -> dict:
        """Set config keys (others keep their values); reset=True first restores the defaults and clears stats."""
        return self._request("POST", "/_control", cfg)

    def reset(self, **cfg: Any) -> dict:
        return self.control(reset=True, **cfg)

    def stats(self) -> dict:
        return self._request("GET", "/_stats")

    def metrics(self) -> str:
        import httpx

        return httpx.get(self.root + "/metrics", timeout=30).text

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=5)

    def __enter__(self) -> StandIn:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


def start_standin(
    host: str = "127.0.0.1", port: int = 0, timeout: float = 30.0, log_path: str | None = None, **config: Any
) -> StandIn:
    """Start a stand-in process on a free port and wait until /health answers."""
    import httpx

    StandInConfig.model_validate(config)  # fail here, not in the child
    root = str(Path(__file__).resolve().parents[2])
    env = {**os.environ, "PYTHONPATH": root + os.pathsep + os.environ.get("PYTHONPATH", "")}
    stderr = open(log_path, "ab") if log_path else subprocess.DEVNULL
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tests.fakes.standin",
            "--host",
            host,
            "--port",
            str(port),
            "--config",
            json.dumps(config),
        ],
        cwd=root,
        env=env,
        stdout=subprocess.PIPE,
        stderr=stderr,
        text=True,
    )
    if log_path:
        stderr.close()
    line = proc.stdout.readline()  # blocks until the child announces its port (or dies)
    if not line.startswith("STANDIN_PORT="):
        proc.kill()
        raise RuntimeError(f"stand-in server did not start (exit code {proc.wait()}, said {line!r})")
    port = int(line.strip().split("=", 1)[1])
    handle = StandIn(proc, port, host, log_path)
    deadline = time.monotonic() + timeout
    while True:
        try:
            if httpx.get(handle.root + "/health", timeout=2).status_code == 200:
                return handle
        except httpx.HTTPError:
            pass
        if time.monotonic() > deadline or proc.poll() is not None:
            handle.stop()
            raise RuntimeError("stand-in server did not answer /health")
        time.sleep(0.05)


if __name__ == "__main__":
    main()
