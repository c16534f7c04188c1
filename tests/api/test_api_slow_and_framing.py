"""Slow readers and request framing (issue #29, item 13): the app driven as uvicorn drives it, and raw
sockets against a real `ocrserve api`
process where the kernel is in the way: a streaming client that never reads is dropped (its conversion
stopped, the connection closed) rather than buffered for without bound, and a request with both
Content-Length and Transfer-Encoding is refused and its connection closed, so nothing smuggled after it
is served."""

from __future__ import annotations

import asyncio
import socket
import uuid

import pytest
from prometheus_client import generate_latest

from tests.fakes.standin import StandIn
from tests.support.api import ApiProcess
from tests.support.helpers import text_pdf

PAGES = 12


def _read_all(sock: socket.socket, timeout: float = 30.0) -> bytes:
    """Everything the server sends until it closes the connection (or timeout passes: then what came)."""
    sock.settimeout(timeout)
    got = b""
    while True:
        try:
            chunk = sock.recv(65536)
        except TimeoutError:
            return got
        if not chunk:
            return got
        got += chunk


def _multipart(path, name: str) -> tuple[bytes, str]:
    boundary = uuid.uuid4().hex
    body = (
        (
            f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="{name}"\r\n'
            "Content-Type: application/pdf\r\n\r\n"
        ).encode()
        + path.read_bytes()
        + f"\r\n--{boundary}--\r\n".encode()
    )
    return body, f"multipart/form-data; boundary={boundary}"


def test_a_stream_client_that_never_reads_is_dropped(standin: StandIn, tmp_path) -> None:
    """The app itself, driven as uvicorn drives it, by a client whose socket never drains: every send of
    the answer after its first chunk waits for ever (a raw socket could not show it: the kernel takes
    megabytes first)."""
    from ocrserve.api.app import create_app
    from ocrserve.settings import Settings

    pdf = text_pdf(tmp_path / "long.pdf", pages=PAGES, title="Slow reader")
    settings = Settings(
        data_dir=tmp_path / "data",
        server=standin.url,
        engine="openai",
        model="chandra-1",
        fallback=False,
        api_keys="",
        render_workers=1,
        api_stream_buffer_bytes=16384,
    )
    body, ctype = _multipart(pdf, "long.pdf")
    app = create_app(settings)
    sent: list[dict] = []

    given: list[bytes] = []

    async def receive():
        if not given:
            given.append(body)
            return {"type": "http.request", "body": body, "more_body": False}
        await asyncio.Event().wait()  # the client never goes away either

    async def send(message):
        sent.append(message)
        if message["type"] == "http.response.body" and len(sent) > 2:
            await asyncio.Event().wait()  # the client stopped reading: its socket never drains

    async def run():
        scope = {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "method": "POST",
            "scheme": "http",
            "path": "/v1/convert",
            "raw_path": b"/v1/convert",
            "query_string": b"stream=true",
            "root_path": "",
            "headers": [
                (b"host", b"x"),
                (b"content-type", ctype.encode()),
                (b"content-length", str(len(body)).encode()),
            ],
            "client": ("127.0.0.1", 1),
            "server": ("127.0.0.1", 80),
        }
        async with app.router.lifespan_context(app):
            # the app returns, its answer unfinished (so the server closes the connection) ...
            await asyncio.wait_for(app(scope, receive, send), timeout=60)
            return generate_latest(app.state.metrics.registry).decode()

    metrics = asyncio.run(run())
    assert sent[0]["type"] == "http.response.start" and sent[0]["status"] == 200
    events = b"".join(m.get("body", b"") for m in sent[1:])
    assert b"event: done" not in events and sent[-1].get("more_body") is not False
    # ... dropped: its conversion was stopped, and said so
    assert 'ocrserve_requests_rejected_total{reason="slow_reader"} 1.0' in metrics
    assert "ocrserve_documents_total{" not in metrics  # the document was never finished


@pytest.mark.parametrize(
    "head",
    [
        "POST /v1/convert HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
        "GET /healthz HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nContent-Length: 0\r\n\r\n0\r\n\r\n",
        "POST /v1/jobs HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nContent-Length: 38\r\n\r\n",
    ],
    ids=["cl-te-post", "te-cl-get", "two-content-lengths"],
)
def test_ambiguous_framing_is_refused_and_the_connection_closed(api: ApiProcess, head: str) -> None:
    smuggled = "GET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n"
    with socket.create_connection(("127.0.0.1", api.port)) as sock:
        sock.sendall((head + smuggled).encode())
        got = _read_all(sock, timeout=15)
    assert got.startswith(b"HTTP/1.1 400"), got[:300]
    assert got.count(b"HTTP/1.1 ") == 1, got  # one answer: the smuggled request is never served
    assert b"connection: close" in got.lower()
