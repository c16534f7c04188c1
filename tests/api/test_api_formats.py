"""The API's formats beyond JSON: a searchable PDF and chunks for retrieval (#20) and plain text (#27), as
the CLI writes them, each with its media type from the format registry."""

from __future__ import annotations

import io
import json

import httpx
import pypdfium2 as pdfium

from ocrserve.document import Document
from ocrserve.render.text import render_text
from tests.support.api import KEYS, ApiProcess, H, parse_sse, wait_job


def test_convert_answers_a_searchable_pdf_and_chunks(api: ApiProcess, docs, standin) -> None:
    c = httpx.Client(base_url=api.url, headers=H(KEYS[0]), timeout=120)
    src = docs["pdf3"].read_bytes()
    r = c.post("/v1/convert", params={"format": "pdf", "pages": "1-2"}, files={"file": ("three.pdf", src)})
    assert r.status_code == 200 and r.headers["content-type"] == "application/pdf", r.text
    pdf = pdfium.PdfDocument(io.BytesIO(r.content))
    assert len(pdf) == 3  # the source's pages, untouched; the converted ones keep their own text layer
    assert "Report" in pdf[0].get_textpage().get_text_range()
    pdf.close()
    r = c.post("/v1/convert", params={"format": "chunks"}, files={"file": ("three.pdf", src)})
    assert r.status_code == 200 and r.headers["content-type"].startswith("application/x-ndjson")
    chunks = [json.loads(ln) for ln in r.text.splitlines() if ln.strip()]
    assert chunks and {p for ch in chunks for p in ch["pages"]} == {1, 2, 3}
    assert all(ch["text"] and ch["blocks"] for ch in chunks)
    r = c.post("/v1/convert", params={"format": "pdf", "stream": "true"}, files={"file": ("three.pdf", src)})
    assert r.status_code == 400 and "stream" in r.json()["detail"]


def test_a_job_result_in_chunks_and_why_not_as_pdf(api: ApiProcess, docs, standin) -> None:
    c = httpx.Client(base_url=api.url, headers=H(KEYS[0]), timeout=120)
    r = c.post("/v1/jobs", files={"file": ("one.pdf", docs["pdf1"].read_bytes())})
    assert r.status_code == 202, r.text
    job_id = r.json()["id"]
    assert wait_job(c, job_id)["status"] == "done"
    r = c.get(f"/v1/jobs/{job_id}/result", params={"format": "chunks"})
    assert r.status_code == 200 and [json.loads(ln)["pages"] for ln in r.text.splitlines()][0] == [1]
    r = c.get(f"/v1/jobs/{job_id}/result", params={"format": "pdf"})
    assert r.status_code == 400 and "/v1/convert?format=pdf" in r.json()["detail"]


def test_plain_text_sync_streamed_and_from_a_job(api: ApiProcess, docs, standin) -> None:
    c = httpx.Client(base_url=api.url, headers=H(KEYS[0]), timeout=120)
    src = docs["pdf3"].read_bytes()
    r = c.post("/v1/convert", params={"format": "txt", "pages": "1-2"}, files={"file": ("three.pdf", src)})
    assert r.status_code == 200 and r.headers["content-type"] == "text/plain; charset=utf-8", r.text
    doc = Document.model_validate_json(
        c.post("/v1/convert", params={"pages": "1-2"}, files={"file": ("three.pdf", src)}).text
    )
    assert r.text == render_text(doc) and r.text.strip() and "<" not in r.text
    r = c.post(
        "/v1/convert", params={"format": "txt", "pages": "1-2", "stream": "true"}, files={"file": ("three.pdf", src)}
    )
    [(_, done)] = [e for e in parse_sse(r.text) if e[0] == "done"]
    assert done["text"] == render_text(Document.model_validate(done["document"]))
    job_id = c.post("/v1/jobs", files={"file": ("one.pdf", docs["pdf1"].read_bytes())}).json()["id"]
    assert wait_job(c, job_id)["status"] == "done"
    r = c.get(f"/v1/jobs/{job_id}/result", params={"format": "txt"})
    assert r.status_code == 200 and r.headers["content-type"] == "text/plain; charset=utf-8" and r.text.strip()
    r = c.get(f"/v1/jobs/{job_id}/result", params={"format": "odt"})
    assert r.status_code == 422 and "format 'odt': unknown; use md, html, json, pdf, chunks, txt" in r.text
