"""Clients that go away: a dropped stream or a dropped plain /v1/convert stops its conversion, gives the key's
slot back and removes its upload folder; no request leaves files behind (success, bad file, 413).

A real `ocrserve api` process (uvicorn) with no API keys (everyone shares the key "open", so one leaked
slot blocks every client) in front of a slow stand-in server.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import time
from pathlib import Path

import httpx
import pytest

from tests.fakes.standin import StandIn
from tests.support.api import ApiProcess, open_api
from tests.support.helpers import blank_pdf, text_pdf

PER_KEY = 2
MAX_UPLOAD = 2_000_000
MAX_PAGES = 5
api_open = open_api("api_open", per_key_concurrency=PER_KEY, max_upload_bytes=MAX_UPLOAD, max_pages=MAX_PAGES)


@pytest.fixture(scope="module")
def pdfs(tmp_path_factory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("disc")
    return {
        "one": text_pdf(d / "a.pdf", pages=1, title="Gone"),
        "three": text_pdf(d / "b.pdf", pages=3, title="Gone"),
        "many": blank_pdf(d / "many.pdf", pages=MAX_PAGES + 1),
    }


def _leftovers(api: ApiProcess) -> list[str]:
    uploads = api.data_dir / "uploads"
    return sorted(p.name for p in uploads.iterdir()) if uploads.exists() else []


def _wait_for(what: str, check, timeout: float = 30.0):
    """Poll `check()` until it returns something true (a deadline against hanging, not a speed check)."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        time.sleep(0.1)
    raise AssertionError(f"{what}: still not so after {timeout:.0f} s (last: {last!r})")


def _in_flight(api: ApiProcess) -> float:
    for line in httpx.get(api.url + "/metrics", timeout=10).text.splitlines():
        if line.startswith("ocrserve_pages_in_flight "):
            return float(line.split()[1])
    raise AssertionError("no ocrserve_pages_in_flight in /metrics")


def _convert_ok(api: ApiProcess, pdf: Path, stream: bool = False) -> httpx.Response | None:
    """One conversion by the shared key; None while it is refused with 429."""
    r = httpx.post(
        api.url + "/v1/convert",
        params={"stream": str(stream).lower()},
        files={"file": (pdf.name, pdf.read_bytes())},
        timeout=60,
    )
    if r.status_code == 429:
        return None
    assert r.status_code == 200, r.text
    return r


def test_streams_dropped_mid_conversion_give_back_their_slot_and_files(
    api_open: ApiProcess, standin: StandIn, pdfs
) -> None:
    standin.control(delay_s=3)  # every page takes a while at the model server

    async def drop_streams() -> list[list[str]]:
        seen = []
        async with httpx.AsyncClient(base_url=api_open.url, timeout=60) as c:
            # more dropped streams than the key may run at once: a leaked slot shows as a 429 here
            for i in range(PER_KEY + 4):
                kinds: list[str] = []
                # the service notices a client gone only a moment later: a slot may be busy for that
                # moment, a leaked one stays busy (and fails this after 10 s)
                deadline = time.monotonic() + 10
                while True:
                    async with c.stream(
                        "POST",
                        "/v1/convert",
                        params={"stream": "true"},
                        files={"file": ("b.pdf", pdfs["three"].read_bytes())},
                    ) as r:
                        if r.status_code == 429 and time.monotonic() < deadline:
                            await r.aread()
                            await asyncio.sleep(0.1)
                            continue
                        assert r.status_code == 200, (r.status_code, await r.aread())
                        if i % 2:
                            break  # go away as soon as the answer starts, before any event
                        async for line in r.aiter_lines():
                            if line.startswith("event:"):
                                kinds.append(line[6:].strip())
                            if "page_started" in kinds:
                                break  # the conversion is at the engine: go away mid-stream
                        break
                if i % 2 == 0:
                    seen.append(kinds)
        return seen

    seen = asyncio.run(drop_streams())
    assert len(seen) == (PER_KEY + 5) // 2 and all(k[0] == "page_started" and "done" not in k for k in seen), seen
    # the dropped conversions stop (their pages leave the engine) long before the stand-in would answer
    _wait_for("pages at the engine after the streams went away", lambda: _in_flight(api_open) == 0)
    _wait_for("upload folders of dropped streams removed", lambda: _leftovers(api_open) == [])
    standin.control(delay_s=0)
    r = _wait_for("a new conversion by the same key", lambda: _convert_ok(api_open, pdfs["one"]))
    assert r.json()["pages"][0]["status"] == "ok"
    r = _wait_for("a new stream by the same key", lambda: _convert_ok(api_open, pdfs["one"], stream=True))
    assert "event: done" in r.text
    assert _leftovers(api_open) == []


def test_plain_convert_dropped_by_its_client_stops_and_gives_back_its_slot(
    api_open: ApiProcess, standin: StandIn, pdfs
) -> None:
    standin.control(delay_s=120)  # the stand-in would hold these pages far longer than the test runs

    async def drop_plain() -> None:
        async with httpx.AsyncClient(base_url=api_open.url, timeout=60) as c:
            calls = [
                asyncio.create_task(c.post("/v1/convert", files={"file": ("b.pdf", pdfs["three"].read_bytes())}))
                for _ in range(PER_KEY)
            ]
            # every slot of the key taken and the pages at the engine: then the clients give up
            while standin.stats()["in_flight"] < PER_KEY or _in_flight(api_open) < PER_KEY:
                assert not any(t.done() for t in calls), [t.result() for t in calls if t.done()]
                await asyncio.sleep(0.05)
            r = await c.post("/v1/convert", files={"file": ("a.pdf", pdfs["one"].read_bytes())})
            assert r.status_code == 429  # the key is full while they run
            for t in calls:
                t.cancel()
            await asyncio.gather(*calls, return_exceptions=True)

    asyncio.run(drop_plain())
    _wait_for("pages at the engine after the clients went away", lambda: _in_flight(api_open) == 0)
    _wait_for("upload folders of dropped requests removed", lambda: _leftovers(api_open) == [])
    standin.control(delay_s=0)
    r = _wait_for("a new conversion by the same key", lambda: _convert_ok(api_open, pdfs["one"]))
    assert r.headers["x-ocr-status"] == "ok"


def test_no_request_leaves_its_upload_behind(api_open: ApiProcess, pdfs, tmp_path) -> None:
    c = httpx.Client(base_url=api_open.url, timeout=60)
    big = tmp_path / "big.pdf"
    big.write_bytes(b"%PDF-1.4\n" + os.urandom(MAX_UPLOAD + 1000))
    cases = [
        (200, {"files": {"file": ("a.pdf", pdfs["one"].read_bytes())}}),
        (
            200,
            {
                "params": {"format": "md"},
                "json": {"filename": "a.pdf", "content_base64": base64.b64encode(pdfs["one"].read_bytes()).decode()},
            },
        ),
        (422, {"files": {"file": ("bad.pdf", b"not a pdf at all\n" * 50)}}),  # opens as nothing
        (422, {"json": {"filename": "e.pdf", "content_base64": ""}}),  # empty
        (413, {"files": {"file": ("many.pdf", pdfs["many"].read_bytes())}}),  # too many pages
        (413, {"files": {"file": ("big.pdf", big.read_bytes())}}),  # declared too large
        (400, {"params": {"pages": "x"}, "files": {"file": ("a.pdf", pdfs["one"].read_bytes())}}),
    ]
    for want, kw in cases:
        r = c.post("/v1/convert", **kw)
        assert r.status_code == want, (kw.get("params"), r.status_code, r.text)
        assert _leftovers(api_open) == [], (want, kw.get("params"))

    def chunks():  # no Content-Length: refused once past the limit, mid-upload
        data = json.dumps(
            {"filename": "big.pdf", "content_base64": base64.b64encode(os.urandom(2 * MAX_UPLOAD)).decode()}
        )
        for i in range(0, len(data), 256 * 1024):
            yield data[i : i + 256 * 1024].encode()

    r = c.post("/v1/convert", content=chunks(), headers={"content-type": "application/json"})
    assert r.status_code == 413
    _wait_for("no upload folder after a chunked 413", lambda: _leftovers(api_open) == [])
    # the same for jobs refused before they are queued: no job folder stays behind
    for want, kw in cases[2:]:
        assert c.post("/v1/jobs", **kw).status_code == want
    assert sorted(p.name for p in (api_open.data_dir / "jobs").iterdir()) == []
    # and nothing held the key's slots
    assert all(
        c.post("/v1/convert", files={"file": ("a.pdf", pdfs["one"].read_bytes())}).status_code == 200
        for _ in range(PER_KEY + 1)
    )


def _page_metrics(api: ApiProcess) -> tuple[dict[str, float], float]:
    """(ocrserve_pages_total by status, ocrserve_page_latency_seconds_count) from /metrics."""
    pages: dict[str, float] = {}
    latency = 0.0
    for line in httpx.get(api.url + "/metrics", timeout=10).text.splitlines():
        if line.startswith("ocrserve_pages_total{"):
            pages[line.split('status="')[1].split('"')[0]] = float(line.split()[-1])
        elif line.startswith("ocrserve_page_latency_seconds_count "):
            latency = float(line.split()[-1])
    return pages, latency


def test_metrics_count_every_page_once_when_a_client_drops_its_stream(
    api_open: ApiProcess, standin: StandIn, pdfs
) -> None:
    before, lat0 = _page_metrics(api_open)
    standin.control(delay_s=30)  # the pages stay at the model server while the client goes away

    async def drop() -> None:
        async with httpx.AsyncClient(base_url=api_open.url, timeout=60) as c:
            async with c.stream(
                "POST", "/v1/convert", params={"stream": "true"}, files={"file": ("b.pdf", pdfs["three"].read_bytes())}
            ) as r:
                assert r.status_code == 200
                async for line in r.aiter_lines():
                    if line.startswith("event: page_started"):
                        break  # mid-stream: pages are at the engine

    asyncio.run(drop())
    _wait_for("pages at the engine after the stream went away", lambda: _in_flight(api_open) == 0)

    def agreed():
        pages, lat = _page_metrics(api_open)
        counted = sum(pages.values()) - sum(before.values())
        return (
            (counted, lat - lat0, pages.get("cancelled", 0) - before.get("cancelled", 0))
            if counted == lat - lat0 and counted >= 1
            else None
        )

    counted, timed, cancelled = _wait_for("every page counted once, with its latency", agreed)
    assert cancelled >= 1  # the pages the client left are counted, under `cancelled`
    standin.control(delay_s=0)
    assert _convert_ok(api_open, pdfs["one"]) is not None  # an ordinary page after it: both move by one
    pages, lat = _page_metrics(api_open)
    assert sum(pages.values()) - sum(before.values()) == lat - lat0 == counted + 1
