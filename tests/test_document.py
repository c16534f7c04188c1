"""Document JSON: round trip, published JSON Schema, validation."""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path

import jsonschema
import pytest

from ocrserve import SCHEMA_VERSION, Document, parse_output, render_json
from ocrserve.document import PageTimings, json_schema, write_json_schema
from tests.support.corpus_util import corpus_files, doc_of, profile_for

SCHEMA_FILE = Path(__file__).parent.parent / "ocrserve" / "schemas" / "document.schema.json"


def _full_doc() -> Document:
    pages = [parse_output(p.read_text(encoding="utf-8"), profile_for(p), (612, 792)) for p in corpus_files()]
    doc = doc_of(*pages, path="corpus/all.pdf")
    doc.source.sha256 = "0" * 64
    p0 = doc.pages[0]
    p0.status, p0.attempts, p0.engine = "fallback", 3, "openai"
    p0.prompt_tokens, p0.completion_tokens, p0.error = 1200, 800, "repetition loop"
    p0.timings = PageTimings(render_s=0.1, engine_s=2.5, parse_s=0.01, queue_s=0.2)
    p0.image_width, p0.image_height = 1280, 1664
    doc.pages[1].raw = "<div>raw kept</div>"
    return doc


def test_published_schema_is_current():
    assert json.loads(SCHEMA_FILE.read_text(encoding="utf-8")) == json_schema()
    packaged = resources.files("ocrserve").joinpath("schemas/document.schema.json").read_text(encoding="utf-8")
    assert json.loads(packaged) == json_schema()


def test_write_json_schema(tmp_path):
    out = tmp_path / "s.json"
    write_json_schema(out)
    assert out.read_text(encoding="utf-8") == SCHEMA_FILE.read_text(encoding="utf-8")


def test_schema_is_valid_draft_2020_12():
    schema = json.loads(SCHEMA_FILE.read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator.check_schema(schema)
    assert SCHEMA_VERSION in schema["$id"]


def test_round_trip_equal_and_valid():
    doc = _full_doc()
    dumped = doc.model_dump_json()
    loaded = Document.model_validate_json(dumped)
    assert loaded == doc
    assert loaded.model_dump_json() == dumped
    data = json.loads(dumped)
    assert data["schema_version"] == SCHEMA_VERSION
    jsonschema.validate(data, json.loads(SCHEMA_FILE.read_text(encoding="utf-8")), cls=jsonschema.Draft202012Validator)


def test_render_json_round_trip_and_valid():
    doc = _full_doc()
    doc.pages[1].raw = None
    text = render_json(doc)
    data = json.loads(text)
    assert "raw" not in data["pages"][0]
    jsonschema.validate(data, json_schema(), cls=jsonschema.Draft202012Validator)
    assert Document.model_validate_json(text) == doc


def test_schema_rejects_bad_documents():
    data = json.loads(_full_doc().model_dump_json())
    data["pages"][0]["status"] = "great"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(data, json_schema(), cls=jsonschema.Draft202012Validator)
    data = json.loads(_full_doc().model_dump_json())
    data["pages"][0]["blocks"][0]["surprise"] = 1
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(data, json_schema(), cls=jsonschema.Draft202012Validator)


def test_document_status_and_page_markdown():
    doc = _full_doc()
    assert doc.status == "fallback"
    doc.pages[2].status = "failed"
    assert doc.status == "failed"
    assert "Thermal Behaviour" in "".join(p.markdown for p in doc.pages)
