"""POST /v1/render (a converted Document in another format, no second conversion) and GET /v1/formats: what
the viewer's download buttons use; the browser side is tests/api/test_viewer.py's."""

from __future__ import annotations

import json

import httpx

from ocrserve.document import Document
from ocrserve.export.formats import format_names, render_format
from tests.fakes.standin import StandIn
from tests.support.api import KEYS, ApiProcess
from tests.support.helpers import text_pdf

AUTH = {"Authorization": f"Bearer {KEYS[0]}"}


def test_render_a_converted_document_in_every_format(api: ApiProcess, standin: StandIn, tmp_path) -> None:
    pdf = text_pdf(tmp_path / "memo.pdf", pages=1)
    formats = httpx.get(api.url + "/v1/formats", timeout=30).json()
    assert [f["name"] for f in formats] == list(format_names())
    assert {f["name"]: f["needs_source"] for f in formats}["pdf"] is True
    r = httpx.post(api.url + "/v1/convert", files={"file": ("memo.pdf", pdf.read_bytes())}, headers=AUTH, timeout=120)
    assert r.status_code == 200, r.text
    doc_json = r.content
    doc = Document.model_validate_json(doc_json)

    for f in formats:
        if f["needs_source"]:
            r = httpx.post(
                api.url + f"/v1/render?format={f['name']}",
                headers=AUTH,
                timeout=120,
                files={
                    "document": ("document.json", doc_json, "application/json"),
                    "file": ("memo.pdf", pdf.read_bytes()),
                },
            )
            assert r.status_code == 200 and r.content.startswith(b"%PDF-"), r.text
        else:
            r = httpx.post(
                api.url + f"/v1/render?format={f['name']}",
                content=doc_json,
                timeout=60,
                headers={**AUTH, "Content-Type": "application/json"},
            )
            assert r.status_code == 200, r.text
            assert r.content.rstrip(b"\n") == render_format(doc, f["name"])[0].rstrip(b"\n"), f["name"]
        assert r.headers["content-type"].startswith(f["media_type"].split(";")[0])
        assert r.headers["content-disposition"] == f'attachment; filename="memo{f["suffix"]}"'

    # refusals, each with its reason
    r = httpx.post(
        api.url + "/v1/render?format=md", content=doc_json, headers={"Content-Type": "application/json"}, timeout=30
    )
    assert r.status_code == 401
    r = httpx.post(
        api.url + "/v1/render?format=pdf",
        content=doc_json,
        timeout=30,
        headers={**AUTH, "Content-Type": "application/json"},
    )
    assert r.status_code == 400 and "built from the source document" in r.json()["detail"]
    other = text_pdf(tmp_path / "other.pdf", pages=1, title="Other")
    r = httpx.post(
        api.url + "/v1/render?format=pdf",
        headers=AUTH,
        timeout=60,
        files={"document": ("document.json", doc_json), "file": ("other.pdf", other.read_bytes())},
    )
    assert r.status_code == 400 and "not the document's source" in r.json()["detail"]
    r = httpx.post(
        api.url + "/v1/render?format=md",
        content=json.dumps({"pages": 3}),
        timeout=30,
        headers={**AUTH, "Content-Type": "application/json"},
    )
    assert r.status_code == 400 and r.json()["detail"].startswith("document: not a Document JSON")
    r = httpx.post(
        api.url + "/v1/render?format=nope",
        content=doc_json,
        timeout=30,
        headers={**AUTH, "Content-Type": "application/json"},
    )
    assert r.status_code == 422
