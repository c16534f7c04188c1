"""The OCR HTTP API end to end: a real `ocrserve api` process (uvicorn) in front of the stand-in vLLM server."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import time

import httpx

from tests.fakes.standin import StandIn
from tests.support.api import KEYS, MAX_PAGES, MAX_UPLOAD, PER_KEY, ApiProcess, H, free_port, wait_job


def _header_text(page: dict) -> str:
    heads = [b for b in page["blocks"] if b["label"] == "Section-Header"]
    assert heads, page
    return heads[0]["text"]


# ------------------------------------------------------------------------------------------- ops


def test_health_ready_docs_viewer_metrics(api: ApiProcess, docs) -> None:
    c = httpx.Client(base_url=api.url, timeout=60)
    assert c.get("/healthz").json() == {"status": "ok"}
    r = c.get("/readyz")
    assert r.status_code == 200 and r.json()["ready"] is True and r.json()["engine"] == "openai"
    spec = c.get("/openapi.json").json()
    for path in ("/v1/convert", "/v1/jobs", "/v1/jobs/{job_id}", "/v1/jobs/{job_id}/result", "/healthz", "/metrics"):
        assert path in spec["paths"], path
    assert "multipart/form-data" in spec["paths"]["/v1/convert"]["post"]["requestBody"]["content"]
    docs_page = c.get("/docs")  # served from the package: nothing from a CDN (works offline)
    assert docs_page.status_code == 200 and "/static/docs.js" in docs_page.text and "/openapi.json" in docs_page.text
    assert "http://" not in docs_page.text and "https://" not in docs_page.text
    assert c.get("/static/docs.js").status_code == 200 and c.get("/static/docs.css").status_code == 200
    page = c.get("/")
    assert page.status_code == 200 and "viewer.js" in page.text
    assert c.get("/static/viewer.js").status_code == 200 and c.get("/static/viewer.css").status_code == 200
    before = c.get("/metrics").text
    with open(docs["pdf1"], "rb") as f:
        assert c.post("/v1/convert", files={"file": ("one.pdf", f, "application/pdf")}, headers=H()).status_code == 200
    m = c.get("/metrics").text
    assert 'ocrserve_pages_total{status="ok"}' in m
    assert "ocrserve_page_latency_seconds_bucket" in m and "ocrserve_queue_depth" in m
    assert "ocrserve_failures_total" in m or "ocrserve_failures" in m

    def ok_pages(text: str) -> float:
        for line in text.splitlines():
            if line.startswith('ocrserve_pages_total{status="ok"}'):
                return float(line.split()[-1])
        return 0.0

    assert ok_pages(m) == ok_pages(before) + 1


def test_every_json_answer_ends_with_a_newline(api: ApiProcess, standin: StandIn, docs) -> None:
    """curl's output of any JSON answer ends the line (the prompt does not stick to it): ops, errors of
    every kind, convert, and every job answer (the status is serialized by FastAPI from its model)."""
    c = httpx.Client(base_url=api.url, timeout=60, headers=H())
    seen: list[tuple[str, int]] = []

    def check(r: httpx.Response, status: int) -> httpx.Response:
        assert r.status_code == status, (r.request.url, r.text)
        assert r.headers["content-type"].startswith("application/json"), r.headers
        assert r.content.endswith(b"\n") and not r.content.endswith(b"\n\n"), (r.request.url, r.content[-40:])
        assert int(r.headers["content-length"]) == len(r.content)
        r.json()
        seen.append((r.request.url.path, status))
        return r

    check(c.get("/healthz"), 200)
    check(c.get("/readyz"), 200)
    check(c.get("/openapi.json"), 200)
    check(c.get("/v1/jobs/abc", headers={"Authorization": "Bearer not-a-key"}), 401)
    check(c.get("/v1/jobs/abc"), 404)  # the service's error
    check(c.get("/no/such/route"), 404)  # the framework's
    check(c.put("/healthz"), 405)
    with open(docs["pdf1"], "rb") as f:
        check(c.post("/v1/convert", params={"format": "docx"}, files={"file": ("one.pdf", f)}), 422)  # validation
    check(c.post("/v1/convert", json={"name": "x"}), 400)
    with open(docs["big"], "rb") as f:
        check(c.post("/v1/convert", files={"file": ("big.pdf", f)}), 413)  # refused by the upload limit
    with open(docs["pdf1"], "rb") as f:
        doc = check(c.post("/v1/convert", files={"file": ("one.pdf", f)}), 200).json()
    assert doc["source"]["page_count"] == 1
    standin.control(delay_s=0.5)
    with open(docs["pdf1"], "rb") as f:
        job_id = check(c.post("/v1/jobs", files={"file": ("one.pdf", f)}), 202).json()["id"]
    check(c.get(f"/v1/jobs/{job_id}"), 200)
    check(c.get(f"/v1/jobs/{job_id}/result"), 409)
    wait_job(c, job_id)
    check(c.get(f"/v1/jobs/{job_id}"), 200)
    check(c.get(f"/v1/jobs/{job_id}/result"), 200)
    check(c.delete(f"/v1/jobs/{job_id}"), 200)
    assert len(seen) == 17


def test_readyz_reports_an_unreachable_engine(tmp_path) -> None:
    dead = f"http://127.0.0.1:{free_port()}/v1"
    proc = ApiProcess(dead, tmp_path / "data", {"OCRSERVE_FALLBACK": "false"}).start()
    try:
        r = httpx.get(proc.url + "/readyz", timeout=30)
        assert r.status_code == 503 and r.json()["ready"] is False
        assert "the API is open" in proc.log()  # no keys configured: a warning at start
        assert httpx.get(proc.url + "/healthz", timeout=5).status_code == 200
    finally:
        proc.stop()


# ------------------------------------------------------------------------------------------ auth


def test_keys_no_key_and_wrong_key_are_refused(api: ApiProcess, docs) -> None:
    c = httpx.Client(base_url=api.url, timeout=60)
    for headers in ({}, H("not-a-key"), {"Authorization": "Basic a2V5LWFscGhh"}, {"Authorization": "Bearer"}):
        with open(docs["pdf1"], "rb") as f:
            r = c.post("/v1/convert", files={"file": ("one.pdf", f)}, headers=headers)
        assert r.status_code == 401, (headers, r.text)
        assert r.headers["www-authenticate"] == "Bearer"
        assert c.get("/v1/jobs/abc", headers=headers).status_code == 401
        assert c.delete("/v1/jobs/abc", headers=headers).status_code == 401
    assert "missing API key" in c.post("/v1/jobs").json()["detail"]
    with open(docs["pdf1"], "rb") as f:
        assert c.post("/v1/convert", files={"file": ("one.pdf", f)}, headers=H(KEYS[2])).status_code == 200


# --------------------------------------------------------------------------------------- convert


def test_convert_json_markdown_html_and_page_ranges(api: ApiProcess, docs) -> None:
    c = httpx.Client(base_url=api.url, timeout=60, headers=H())
    with open(docs["pdf3"], "rb") as f:
        r = c.post("/v1/convert", files={"file": ("three.pdf", f, "application/pdf")})
    assert r.status_code == 200, r.text
    doc = r.json()
    assert doc["source"]["type"] == "pdf" and doc["source"]["page_count"] == 3
    assert [p["index"] for p in doc["pages"]] == [0, 1, 2]
    heads = [_header_text(p) for p in doc["pages"]]
    assert len(set(heads)) == 3 and all(h.startswith("Page ") for h in heads)  # each page its own answer
    for p in doc["pages"]:
        assert p["status"] == "ok" and p["width"] == 612 and p["height"] == 792
        assert [b["label"] for b in p["blocks"]][-2:] == ["Text", "Image"]
        assert any(b["label"] == "Table" for b in p["blocks"])

    with open(docs["pdf3"], "rb") as f:
        r = c.post("/v1/convert", params={"pages": "2-3", "format": "md"}, files={"file": ("three.pdf", f)})
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/markdown")
    md = r.text
    assert f"# {heads[1]}" in md and f"# {heads[2]}" in md and heads[0] not in md
    assert "| Quarter | Revenue | Margin |" in md

    body = {"filename": "scan.png", "content_base64": base64.b64encode(docs["png"].read_bytes()).decode()}
    r = c.post("/v1/convert", params={"format": "html"}, json=body)
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
    assert 'data-label="Table"' in r.text and "<table" in r.text
    r = c.post("/v1/convert", json=body)
    doc = r.json()
    assert doc["source"]["type"] == "png" and doc["pages"][0]["unit"] == "px" and doc["pages"][0]["width"] == 640


def test_bad_requests_name_the_reason(api: ApiProcess, docs) -> None:
    c = httpx.Client(base_url=api.url, timeout=60, headers=H())
    with open(docs["bad"], "rb") as f:
        r = c.post("/v1/convert", files={"file": ("notes.pdf", f)})
    assert r.status_code == 422
    assert "notes.pdf" in r.json()["detail"] and "not" in r.json()["detail"].lower()
    with open(docs["bad"], "rb") as f:  # a job for a bad file is refused at once, not queued
        assert c.post("/v1/jobs", files={"file": ("notes.pdf", f)}).status_code == 422
    assert c.post("/v1/convert", json={"filename": "x.pdf", "content_base64": "%%% not base64"}).status_code == 400
    assert c.post("/v1/convert", json={"filename": "x.pdf", "content_base64": ""}).status_code == 422  # empty
    assert c.post("/v1/convert", json={"name": "x"}).status_code == 400
    assert c.post("/v1/convert", content=b"raw bytes", headers={"content-type": "application/pdf"}).status_code == 415
    assert c.post("/v1/convert", data={"other": "x"}, files={"nofile": ("a", b"b")}).status_code == 400
    with open(docs["pdf1"], "rb") as f:
        r = c.post("/v1/convert", params={"pages": "two"}, files={"file": ("one.pdf", f)})
    assert r.status_code == 400 and "two" in r.json()["detail"]
    with open(docs["pdf1"], "rb") as f:
        r = c.post("/v1/convert", params={"pages": "5-6"}, files={"file": ("one.pdf", f)})
    assert r.status_code == 422 and "selects none" in r.json()["detail"]
    with open(docs["pdf1"], "rb") as f:
        assert c.post("/v1/convert", params={"format": "docx"}, files={"file": ("one.pdf", f)}).status_code == 422


def test_oversize_upload_and_too_many_pages_are_413(api: ApiProcess, docs) -> None:
    c = httpx.Client(base_url=api.url, timeout=60, headers=H())
    with open(docs["big"], "rb") as f:
        r = c.post("/v1/convert", files={"file": ("big.pdf", f)})
    assert r.status_code == 413 and str(MAX_UPLOAD) in r.json()["detail"]

    def chunks():  # no Content-Length: counted as it arrives, refused once past the limit
        data = json.dumps(
            {"filename": "big.pdf", "content_base64": base64.b64encode(os.urandom(2 * MAX_UPLOAD)).decode()}
        ).encode()
        for i in range(0, len(data), 256 * 1024):
            yield data[i : i + 256 * 1024]

    r = c.post("/v1/jobs", content=chunks(), headers={"content-type": "application/json"})
    assert r.status_code == 413
    with open(docs["many"], "rb") as f:
        r = c.post("/v1/convert", files={"file": ("many.pdf", f)})
    assert r.status_code == 413 and f"limit is {MAX_PAGES}" in r.json()["detail"]
    with open(docs["many"], "rb") as f:  # a page range under the limit is fine
        r = c.post("/v1/convert", params={"pages": "1-2"}, files={"file": ("many.pdf", f)})
    assert r.status_code == 200 and len(r.json()["pages"]) == 2
    assert 'ocrserve_requests_rejected_total{reason="too_large"}' in c.get("/metrics").text


def test_per_key_concurrency_is_429_with_retry_after(api: ApiProcess, standin: StandIn, docs) -> None:
    standin.control(delay_s=1.0)
    data = docs["pdf1"].read_bytes()

    async def main() -> list[httpx.Response]:
        async with httpx.AsyncClient(base_url=api.url, timeout=60) as c:
            same = [
                c.post("/v1/convert", files={"file": ("one.pdf", data)}, headers=H(KEYS[1])) for _ in range(PER_KEY + 3)
            ]
            other = c.post("/v1/convert", files={"file": ("one.pdf", data)}, headers=H(KEYS[3]))
            return await asyncio.gather(*same, other)

    *same, other = asyncio.run(main())
    codes = sorted(r.status_code for r in same)
    assert codes.count(200) >= 1 and codes.count(429) >= 3 and set(codes) <= {200, 429}, codes
    for r in same:
        if r.status_code == 429:
            assert int(r.headers["retry-after"]) >= 1
    assert other.status_code == 200  # another key is not held back


def test_convert_status_header_ok_and_failed(api: ApiProcess, standin: StandIn, docs) -> None:
    c = httpx.Client(base_url=api.url, timeout=60, headers=H())
    with open(docs["pdf3"], "rb") as f:
        r = c.post("/v1/convert", params={"pages": "3"}, files={"file": ("three.pdf", f)})
    assert r.status_code == 200 and r.headers["x-ocr-status"] == "ok"
    standin.control(default_plan=["400"])  # the model server refuses every page; no fallback on this API
    with open(docs["pdf3"], "rb") as f:
        r = c.post("/v1/convert", params={"pages": "1-2"}, files={"file": ("three.pdf", f)})
    assert r.status_code == 200 and r.headers["x-ocr-status"] == "failed"
    pages = r.json()["pages"]
    assert [p["status"] for p in pages] == ["failed", "failed"] and all("400" in p["error"] for p in pages), pages
    with open(docs["pdf1"], "rb") as f:
        r = c.post("/v1/convert", params={"format": "md"}, files={"file": ("one.pdf", f)})
    assert r.status_code == 200 and r.headers["x-ocr-status"] == "failed"
    with open(docs["png"], "rb") as f:  # a job's result says the same (a page not asked for yet: refused too)
        job_id = c.post("/v1/jobs", files={"file": ("scan.png", f)}).json()["id"]
    assert wait_job(c, job_id)["pages_failed"] == 1
    for fmt in ("json", "md", "html"):
        r = c.get(f"/v1/jobs/{job_id}/result", params={"format": fmt})
        assert r.status_code == 200 and r.headers["x-ocr-status"] == "failed", (fmt, r.status_code)
    paths = c.get("/openapi.json").json()["paths"]
    op = paths["/v1/convert"]["post"]
    header = op["responses"]["200"]["headers"]["X-OCR-Status"]
    assert header["schema"]["enum"] == ["ok", "fallback", "failed"] and "X-OCR-Status" in op["description"]
    assert paths["/v1/jobs/{job_id}/result"]["get"]["responses"]["200"]["headers"]["X-OCR-Status"] == header


# ------------------------------------------------------------------------------------------ jobs


def test_jobs_lifecycle(api: ApiProcess, standin: StandIn, docs) -> None:
    c = httpx.Client(base_url=api.url, timeout=60, headers=H())
    standin.control(delay_s=0.5)
    with open(docs["pdf3"], "rb") as f:
        r = c.post("/v1/jobs", files={"file": ("three.pdf", f)})
    assert r.status_code == 202, r.text
    job_id = r.json()["id"]
    assert r.headers["location"] == f"/v1/jobs/{job_id}" and r.json()["pages_total"] == 3
    j = c.get(f"/v1/jobs/{job_id}").json()
    assert j["status"] in ("queued", "running") and j["progress"]["pages_total"] == 3
    early = c.get(f"/v1/jobs/{job_id}/result")
    assert early.status_code == 409 and job_id in early.json()["detail"]
    assert c.get(f"/v1/jobs/{job_id}", headers=H(KEYS[1])).status_code == 404  # another key's job
    j = wait_job(c, job_id)
    assert j["status"] == "done" and j["progress"] == {"pages_done": 3, "pages_total": 3} and j["pages_failed"] == 0
    res = c.get(f"/v1/jobs/{job_id}/result")
    doc = res.json()
    assert [p["index"] for p in doc["pages"]] == [0, 1, 2] and all(p["status"] == "ok" for p in doc["pages"])
    assert res.headers["x-ocr-status"] == "ok"
    md = c.get(f"/v1/jobs/{job_id}/result", params={"format": "md"})
    assert md.status_code == 200 and md.text.count("# Page ") == 3 and md.headers["x-ocr-status"] == "ok"
    html = c.get(f"/v1/jobs/{job_id}/result", params={"format": "html"})
    assert "data-label" in html.text and html.headers["x-ocr-status"] == "ok"
    assert c.delete(f"/v1/jobs/{job_id}", headers=H(KEYS[1])).status_code == 404
    assert c.delete(f"/v1/jobs/{job_id}").json() == {"id": job_id, "deleted": True}
    assert c.get(f"/v1/jobs/{job_id}").status_code == 404
    assert c.get(f"/v1/jobs/{job_id}/result").status_code == 404

    # page ranges and JSON input; deleting a running job stops it
    standin.control(delay_s=3.0)
    body = {"filename": "three.pdf", "content_base64": base64.b64encode(docs["pdf3"].read_bytes()).decode()}
    r = c.post("/v1/jobs", params={"pages": "2"}, json=body)
    assert r.status_code == 202 and r.json()["pages_total"] == 1
    running = r.json()["id"]
    deadline = time.monotonic() + 30
    while c.get(f"/v1/jobs/{running}").json()["status"] != "running" and time.monotonic() < deadline:
        time.sleep(0.05)
    assert c.delete(f"/v1/jobs/{running}").status_code == 200
    assert c.get(f"/v1/jobs/{running}").status_code == 404
