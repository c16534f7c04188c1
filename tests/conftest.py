"""The fixtures the test folders share. The fakes and helpers behind them live in tests/fakes/ (the stand-in
vLLM server) and tests/support/ (documents, the API process); test modules import those, never each other.

- `standin`: the stand-in vLLM server (tests/fakes/standin.py), one per pytest session (per xdist worker),
  its config and stats reset for each test.
- `api`, `api_fb`: one `ocrserve api` process each per session in front of that stand-in
  (tests/support/api.py); `api_fb` has the lite fallback on.
- `docs`: the documents the API tests upload, once per module (a module's own `docs` fixture wins).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ocrserve.engines.lite import rapid
from tests.fakes.standin import StandIn, start_standin
from tests.support.api import API_ENV, ApiProcess, make_docs, shared_api

# RapidOCR run in a test process (tests that call lite_raw_for or ocr_lines directly) on one onnxruntime
# thread: the suite's 2 xdist workers share CI's 2 cores, and onnxruntime's default (a thread per core,
# spinning while it waits for work) took twice the time for a page there (a 1700x2200 scan: 12 s -> 6 s,
# two processes side by side). Same words: a thread count splits the work, not the arithmetic. The lite
# engine's own worker processes set theirs (rapid._worker_init), as a user's run does.
rapid._THREADS = 1

_SESSION: dict[str, StandIn] = {}


@pytest.fixture
def standin(request) -> StandIn:
    """A stand-in server shared by the whole session, reset (config and stats) for each test."""
    handle = _SESSION.get("server")
    if handle is None or not handle.alive():
        handle = start_standin()
        _SESSION["server"] = handle

        def _stop(h=handle):
            h.stop()
            _SESSION.pop("server", None)

        request.config.add_cleanup(_stop)
    handle.reset()
    return handle


@pytest.fixture
def api(standin: StandIn, tmp_path_factory, request) -> ApiProcess:
    """One API process per pytest session in front of the session's stand-in (reset for each test); no fallback."""
    return shared_api("api", standin, API_ENV, tmp_path_factory, request)


@pytest.fixture
def api_fb(standin: StandIn, tmp_path_factory, request) -> ApiProcess:
    """Like `api`, with the lite fallback on (pages the model engine gives up on are rescued)."""
    return shared_api("api_fb", standin, {**API_ENV, "OCRSERVE_FALLBACK": "true"}, tmp_path_factory, request)


@pytest.fixture(scope="module")
def docs(tmp_path_factory) -> dict[str, Path]:
    """The API tests' uploads: PDFs of 1 and 3 pages, a PNG, too many pages, not a PDF, over the size limit."""
    return make_docs(tmp_path_factory.mktemp("docs"))
