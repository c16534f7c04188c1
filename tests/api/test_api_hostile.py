"""Hostile clients of the API (#16): chunked uploads over the limit, huge page selections, server paths,
slow and bodiless uploads, connection caps, page images and keys, encrypted PDFs, long job ids, CORS.

A real `ocrserve api` process (uvicorn) with no API keys (everyone shares one key's slots, as in a
default install) and short upload deadlines, in front of the stand-in vLLM server; the tests that
need keys use the keyed API of test_api.
"""

from __future__ import annotations

import asyncio
import base64
import socket
import time
from pathlib import Path

import httpx
import pytest

from tests.support.api import KEYS, ApiProcess, H, open_api, parse_sse
from tests.support.helpers import encrypted_pdf, text_pdf

MAX_UPLOAD = 2_000_000
PER_KEY = 4  # the default
MAX_CONNECTIONS = 8
BODY_TIMEOUT = 10
HEADER_TIMEOUT = 3
ORIGIN = "https://app.example.com"
api_hostile = open_api(
    "api_hostile",
    per_key_concurrency=PER_KEY,
    max_upload_bytes=MAX_UPLOAD,
    api_body_timeout_s=BODY_TIMEOUT,
    api_header_timeout_s=HEADER_TIMEOUT,
    api_max_connections=MAX_CONNECTIONS,
    cors_origins=ORIGIN,
)


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("hostile")
    return {
        "one": text_pdf(d / "one.pdf", pages=1, title="Hostile"),
        "locked": encrypted_pdf(d / "locked.pdf", "s3cret"),
    }


def _multipart(name: str, data: bytes, boundary: str = "ocrserve-test-boundary", **fields: str) -> bytes:
    parts = [
        f'--{boundary}\r\nContent-Disposition: form-data; name="{k}"\r\n\r\n{v}\r\n'.encode() for k, v in fields.items()
    ]
    parts.append(
        f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="{name}"\r\n'
        "Content-Type: application/octet-stream\r\n\r\n".encode()
        + data
        + b"\r\n"
    )
    return b"".join(parts) + f"--{boundary}--\r\n".encode()


def _chunked(body: bytes, size: int = 64 * 1024):
    """A body sent without Content-Length (Transfer-Encoding: chunked)."""
    for i in range(0, len(body), size):
        yield body[i : i + size]


MULTIPART = {"content-type": "multipart/form-data; boundary=ocrserve-test-boundary"}


# ------------------------------------------------------------------------------ 2: chunked uploads


def test_a_chunked_multipart_upload_over_the_limit_is_413_with_its_reason(api_hostile: ApiProcess, files) -> None:
    c = httpx.Client(base_url=api_hostile.url, timeout=60)
    body = _multipart("big.pdf", b"%PDF-1.4\n" + b"x" * (2 * MAX_UPLOAD))
    for path in ("/v1/convert", "/v1/jobs"):
        r = c.post(path, content=_chunked(body), headers=MULTIPART)
        assert r.status_code == 413, (path, r.status_code, r.text)
        assert f"the limit is {MAX_UPLOAD} bytes" in r.json()["detail"]
    # a chunked multipart upload under the limit is converted as usual
    r = c.post("/v1/convert", content=_chunked(_multipart("one.pdf", files["one"].read_bytes())), headers=MULTIPART)
    assert r.status_code == 200 and r.json()["pages"][0]["status"] == "ok", r.text


# ------------------------------------------------------------------------------ 3: huge page selections


def test_300_ranges_of_a_million_pages_do_not_stall_the_service(api_hostile: ApiProcess, files) -> None:
    # the selection is parsed to ranges (ingest/sources.py), off the event loop: answered at once (the old
    # parser built a set of every page number: over a minute here, with /healthz stalled)
    pages = ",".join(["1-1000000"] * 300)

    async def main() -> tuple[httpx.Response, list[int]]:
        async with httpx.AsyncClient(base_url=api_hostile.url) as c:
            call = asyncio.create_task(
                c.post(
                    "/v1/convert",
                    params={"pages": pages},
                    timeout=30,
                    files={"file": ("one.pdf", files["one"].read_bytes())},
                )
            )
            health = []
            while not call.done():  # the service answers others while it looks at the selection
                health.append((await c.get("/healthz", timeout=10)).status_code)
                await asyncio.sleep(0.2)
            return await call, health

    r, health = asyncio.run(main())
    assert health and set(health) == {200}
    if r.status_code == 200:
        assert [p["index"] for p in r.json()["pages"]] == [0]  # the selection, clipped to the document
    else:
        assert r.status_code in (400, 422) and "pages" in r.json()["detail"], r.text


# ------------------------------------------------------------------------------ 5: no server paths


def test_answers_name_the_uploaded_file_never_the_data_directory(api_hostile: ApiProcess, files) -> None:
    c = httpx.Client(base_url=api_hostile.url, timeout=60)
    data = files["one"].read_bytes()
    r = c.post("/v1/convert", files={"file": ("../../etc/report.pdf", data)})
    assert r.status_code == 200 and r.json()["source"]["path"] == "report.pdf"
    r = c.post("/v1/convert", params={"stream": "true"}, files={"file": ("report.pdf", data)})
    done = parse_sse(r.text)[-1]
    assert done[0] == "done" and done[1]["document"]["source"]["path"] == "report.pdf"
    job = c.post("/v1/jobs", files={"file": ("report.pdf", data)}).json()["id"]
    deadline = time.monotonic() + 60
    while c.get(f"/v1/jobs/{job}").json()["status"] not in ("done", "failed") and time.monotonic() < deadline:
        time.sleep(0.1)
    result = c.get(f"/v1/jobs/{job}/result")
    assert result.json()["source"]["path"] == "report.pdf"
    for text in (result.text, r.text, c.post("/v1/convert", files={"file": ("x.png", b"not an image" * 9)}).text):
        text = text.replace("/v1/jobs/", "/v1/")  # the API's own URLs (a job's figures) are no server path
        assert str(api_hostile.data_dir) not in text and "/uploads/" not in text and "/jobs/" not in text


# ------------------------------------------------------------------------------ 6: slow, bodiless uploads


def _hold(url: str, head_only: bool = True) -> socket.socket:
    """A connection that sends a request head and then nothing (or not even a whole head)."""
    host, port = url.removeprefix("http://").split(":")
    s = socket.create_connection((host, int(port)), timeout=60)
    head = (
        b"POST /v1/convert HTTP/1.1\r\nHost: x\r\nContent-Type: multipart/form-data; boundary=b\r\n"
        b"Content-Length: 100000\r\n"
    )
    s.sendall(head + b"\r\n" if head_only else head)
    return s


def _answer(s: socket.socket) -> bytes:
    """What the server sends before it closes the connection."""
    out = b""
    while chunk := s.recv(65536):
        out += chunk
    s.close()
    return out


def _convert(url: str, files) -> int:
    return httpx.post(
        url + "/v1/convert", files={"file": ("one.pdf", files["one"].read_bytes())}, timeout=60
    ).status_code


def test_bodiless_uploads_hold_no_slot_and_time_out(api_hostile: ApiProcess, files) -> None:
    assert _convert(api_hostile.url, files) == 200  # the service is warm (its render worker started)
    held = [_hold(api_hostile.url) for _ in range(PER_KEY)]  # as many as the (shared) key's slots
    time.sleep(0.5)
    assert _convert(api_hostile.url, files) == 200  # not 429: the held uploads take no slot
    for s in held:
        s.setblocking(False)
        with pytest.raises(BlockingIOError):
            s.recv(1)  # still waiting for its body after the other client's answer
    for s in held:  # each is told it was too slow once the body deadline passes, then closed
        s.settimeout(60)
        answer = _answer(s)
        assert answer.startswith(b"HTTP/1.1 408") and f"within {BODY_TIMEOUT} s".encode() in answer, answer
    half = _hold(api_hostile.url, head_only=False)  # not even a whole request head: closed after a while
    assert _answer(half) == b""
    assert _convert(api_hostile.url, files) == 200


def test_open_connections_are_capped(api_hostile: ApiProcess, files) -> None:
    held = []
    for _ in range(MAX_CONNECTIONS - 1):  # one by one: each is taken in while there is room
        held.append(_hold(api_hostile.url))
        time.sleep(0.2)
    r = httpx.get(api_hostile.url + "/healthz", timeout=30)
    assert r.status_code == 503  # uvicorn's cap: a flood of connections cannot grow without bound
    for s in held:  # they were let in (and time out like any bodiless upload)
        assert _answer(s).startswith(b"HTTP/1.1 408")
    assert _convert(api_hostile.url, files) == 200


# ------------------------------------------------------------------------------ 8: weak spots


def test_page_images_need_the_key_that_converted_the_page(api: ApiProcess, files) -> None:
    c = httpx.Client(base_url=api.url, timeout=60)
    r = c.post(
        "/v1/convert",
        params={"stream": "true"},
        headers=H(KEYS[0]),
        files={"file": ("one.pdf", files["one"].read_bytes())},
    )
    url = next(d["image"] for k, d in parse_sse(r.text) if k == "page_started")
    assert c.get(url).status_code == 401
    assert c.get(url, headers=H(KEYS[1])).status_code == 404  # another key's page
    png = c.get(url, headers=H(KEYS[0]))
    assert png.status_code == 200 and png.content.startswith(b"\x89PNG")


def test_the_page_image_cache_is_bounded_by_bytes() -> None:
    from ocrserve.api.images import PageImages
    from ocrserve.settings import Settings

    cache = PageImages(350_000)
    tokens = [cache.put(bytes([i]) * 100_000, owner="k") for i in range(10)]
    assert cache.bytes <= 350_000 and len(cache) == 3
    assert [cache.get(t) is not None for t in tokens] == [False] * 7 + [True] * 3  # the oldest went first
    assert cache.get(tokens[-1], owner="other") is None and cache.get(tokens[-1], owner="k") == bytes([9]) * 100_000
    assert cache.put(b"x" * 400_000) is None and len(cache) == 3  # one image over the bound is not kept
    assert Settings(api_page_cache_bytes=5).api_page_cache_bytes == 5


def test_encrypted_pdfs_convert_with_a_password_field(api_hostile: ApiProcess, files) -> None:
    c = httpx.Client(base_url=api_hostile.url, timeout=60)
    data = files["locked"].read_bytes()
    r = c.post("/v1/convert", files={"file": ("locked.pdf", data)})
    assert r.status_code == 422 and "'password' field" in r.json()["detail"] and "--password" not in r.text
    r = c.post("/v1/convert", files={"file": ("locked.pdf", data)}, data={"password": "wrong"})
    assert r.status_code == 422 and "wrong password" in r.json()["detail"]
    r = c.post("/v1/convert", files={"file": ("locked.pdf", data)}, data={"password": "s3cret"})
    assert r.status_code == 200 and r.json()["pages"][0]["status"] == "ok", r.text
    body = {"filename": "locked.pdf", "content_base64": base64.b64encode(data).decode(), "password": "s3cret"}
    assert c.post("/v1/convert", json=body).json()["pages"][0]["status"] == "ok"
    job = c.post("/v1/jobs", json=body).json()["id"]
    deadline = time.monotonic() + 60
    while (j := c.get(f"/v1/jobs/{job}").json())["status"] not in ("done", "failed") and time.monotonic() < deadline:
        time.sleep(0.1)
    assert j["status"] == "done" and j["pages_failed"] == 0, j
    assert not (api_hostile.data_dir / "jobs" / job / "input").exists()  # the input and its password are gone


def test_a_long_job_id_is_not_echoed_whole(api_hostile: ApiProcess) -> None:
    c = httpx.Client(base_url=api_hostile.url, timeout=60)
    for method in ("GET", "DELETE"):
        r = c.request(method, "/v1/jobs/" + "a" * 10_000)
        assert r.status_code == 404 and len(r.json()["detail"]) < 300, (method, len(r.text))
    assert len(c.get("/v1/jobs/" + "b" * 10_000 + "/result").json()["detail"]) < 300


def test_cors_only_for_the_configured_origins(api_hostile: ApiProcess, api: ApiProcess) -> None:
    pre = {
        "Origin": ORIGIN,
        "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "authorization,content-type",
    }
    r = httpx.options(api_hostile.url + "/v1/convert", headers=pre, timeout=30)
    assert r.status_code == 200 and r.headers["access-control-allow-origin"] == ORIGIN
    assert "authorization" in r.headers["access-control-allow-headers"].lower()
    r = httpx.get(api_hostile.url + "/healthz", headers={"Origin": ORIGIN}, timeout=30)
    assert r.headers["access-control-allow-origin"] == ORIGIN
    r = httpx.get(api_hostile.url + "/healthz", headers={"Origin": "https://evil.example"}, timeout=30)
    assert "access-control-allow-origin" not in r.headers
    # no origins configured (the default): no CORS headers at all
    r = httpx.get(api.url + "/healthz", headers={"Origin": ORIGIN}, timeout=30)
    assert "access-control-allow-origin" not in r.headers


# ------------------------------------------------------------------------------ #18.5: the startup line


def test_the_startup_line_names_the_engine_and_a_model_only_for_a_model_engine(tmp_path) -> None:
    from ocrserve.api.app import startup_line

    assert startup_line("openai", "chandra-2", Path("d")) == "OCR API: engine openai, model chandra-2, data in d"
    proc = ApiProcess(
        None, tmp_path / "data", {"OCRSERVE_API_KEYS": "", "OCRSERVE_RENDER_WORKERS": "1"}, engine="lite"
    ).start()
    try:
        line = next(ln for ln in proc.log().splitlines() if "OCR API: engine" in ln)
        assert "engine lite" in line and "model" not in line, line
    finally:
        proc.stop()
