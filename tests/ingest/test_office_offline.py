"""LibreOffice converts without network (ingest/offline.py): a document that names URLs (an HTML page's
images and style sheet) cannot make this machine fetch them (SSRF), unless OCRSERVE_OFFICE_NETWORK allows it."""

from __future__ import annotations

import http.server
import threading
from pathlib import Path

import pytest

from ocrserve.ingest import office
from ocrserve.ingest.offline import network_isolation
from tests.support.office import SOFFICE


@pytest.fixture
def listener():
    """An HTTP server on the loopback that counts the requests it gets (and answers 404)."""
    hits: list[str] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            hits.append(self.path)
            self.send_response(404)
            self.end_headers()

        def log_message(self, *args) -> None:
            pass

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    yield f"http://127.0.0.1:{srv.server_address[1]}", hits
    srv.shutdown()
    srv.server_close()


def _page(folder: Path, url: str, name: str) -> Path:
    p = folder / f"{name}.html"
    p.write_text(
        f'<html><head><link rel="stylesheet" href="{url}/style.css"></head><body><h1>Quarterly report</h1>'
        f'<p>Before the picture.</p><img src="{url}/internal-admin.png"><p>After it.</p></body></html>',
        encoding="utf-8",
    )
    return p


def test_a_document_s_urls_are_not_fetched_unless_allowed(listener, tmp_path, monkeypatch):
    assert SOFFICE, "LibreOffice is not installed (CI installs it: .ci/run)"
    assert network_isolation(), "no network namespace could be made here (unshare --net)"
    url, hits = listener
    monkeypatch.delenv("OCRSERVE_OFFICE_NETWORK", raising=False)
    offline = _page(tmp_path, url, "offline")
    assert office.convert_batch([(offline, "html")]) == {}
    assert office.cached_pdf(offline) is not None  # converted, its text there
    assert hits == []
    # the control: allowed the network, LibreOffice fetches what the page names (so the check above can fail)
    monkeypatch.setenv("OCRSERVE_OFFICE_NETWORK", "true")
    online = _page(tmp_path, url, "online")
    assert office.convert_batch([(online, "html")]) == {}
    assert "/internal-admin.png" in hits
