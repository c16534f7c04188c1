"""Adding an output format is one record (issue 27): a format registered at runtime is validated by the
options, named in the CLI help, written by a conversion, counted by the resume rule and served by the
API with its media type."""

from __future__ import annotations

import asyncio
import json
import time

import pytest

from ocrserve.export.formats import (
    OutputFormat,
    RenderContext,
    default_formats,
    format_names,
    formats_help,
    get_format,
    register_format,
    unregister_format,
)
from ocrserve.labels import HEADER_FOOTER
from ocrserve.pipeline.local import Converter
from ocrserve.pipeline.options import ConvertOptions, OptionsError
from tests.support.helpers import text_pdf


def _count(doc, ctx: RenderContext) -> str:
    words = sum(
        len(b.text.split())
        for p in doc.pages
        for b in p.blocks
        if ctx.keep_headers_footers or b.label not in HEADER_FOOTER
    )
    return json.dumps({"words": words, "pages": len(doc.pages)})


@pytest.fixture
def wordcount():
    fmt = register_format(OutputFormat("wordcount", ".wc.json", "application/vnd.wordcount+json", _count, "word count"))
    yield fmt
    unregister_format("wordcount")


def _run(src, out, formats) -> str:
    async def go():
        async with Converter(output_dir=out, engine="lite", formats=formats) as conv:
            summary = await conv.run([str(src)])
        [result] = summary.results
        return result.status

    return asyncio.run(go())


def test_a_registered_format_is_known_everywhere(wordcount):
    assert "wordcount" in format_names() and get_format("wordcount") is wordcount
    assert "wordcount (word count: <name>.wc.json)" in formats_help()
    assert default_formats() == ("md", "html", "json")  # not a default unless its record says so
    assert ConvertOptions.build(formats="wordcount,md").formats == ("md", "json", "wordcount")
    unregister_format("wordcount")
    with pytest.raises(OptionsError, match="format wordcount: unknown; use md, html, json, pdf, chunks, txt"):
        ConvertOptions.build(formats=["wordcount"])  # checked against the registry now, not at import


def test_register_format_refuses_clashes(wordcount):
    with pytest.raises(ValueError, match="already registered"):
        register_format(wordcount)
    with pytest.raises(ValueError, match="suffix .wc.json is format wordcount's"):
        register_format(OutputFormat("wc2", ".wc.json", "text/plain", _count))
    with pytest.raises(ValueError, match="lower-case"):
        register_format(OutputFormat("Word,Count", ".wcx", "text/plain", _count))
    assert "wc2" not in format_names()


def test_a_registered_format_is_written_resumed_and_redone(wordcount, tmp_path):
    src = text_pdf(tmp_path / "memo.pdf", pages=2, title="Memo")
    out = tmp_path / "out"
    folder = out / "memo"
    assert _run(src, out, ["wordcount"]) == "ok"
    assert sorted(p.name for p in folder.iterdir() if p.is_file()) == ["memo.json", "memo.wc.json"]
    counted = json.loads((folder / "memo.wc.json").read_text())
    assert counted["pages"] == 2 and counted["words"] > 20
    stamp = (folder / "memo.json").stat().st_mtime_ns

    assert _run(src, out, ["wordcount"]) == "skipped"  # complete: every asked format's file is there
    # the default formats' files are missing: rendered from the JSON (#29.3), nothing converted again
    assert _run(src, out, None) == "updated"
    assert (folder / "memo.json").stat().st_mtime_ns == stamp
    names = ["memo.html", "memo.json", "memo.md", "memo.wc.json"]  # the registered format's file kept
    assert sorted(p.name for p in folder.iterdir() if p.is_file()) == names

    (folder / "memo.wc.json").unlink()
    assert _run(src, out, ["md", "wordcount"]) == "updated"  # a missing file: rendered again from the JSON
    assert json.loads((folder / "memo.wc.json").read_text()) == counted
    assert _run(src, out, ["md", "wordcount"]) == "skipped"


def test_the_api_serves_a_registered_format_with_its_media_type(wordcount, tmp_path):
    """In-process (FastAPI's TestClient): the format is registered in this process, which runs the app."""
    from fastapi.testclient import TestClient

    from ocrserve.api.app import create_app
    from ocrserve.settings import Settings

    src = text_pdf(tmp_path / "memo.pdf", pages=1, title="Memo").read_bytes()
    settings = Settings(data_dir=tmp_path / "data", engine="lite", server=None, api_keys="")
    with TestClient(create_app(settings)) as c:
        r = c.post("/v1/convert", params={"format": "wordcount"}, files={"file": ("memo.pdf", src)})
        assert r.status_code == 200, r.text
        assert r.headers["content-type"] == "application/vnd.wordcount+json"
        assert r.json()["pages"] == 1 and r.json()["words"] > 10
        job = c.post("/v1/jobs", files={"file": ("memo.pdf", src)}).json()["id"]
        for _ in range(600):
            if c.get(f"/v1/jobs/{job}").json()["status"] in ("done", "failed"):
                break
            time.sleep(0.05)
        r = c.get(f"/v1/jobs/{job}/result", params={"format": "wordcount"})
        assert r.status_code == 200 and r.headers["content-type"] == "application/vnd.wordcount+json"
        assert r.json()["words"] > 10
        unregister_format("wordcount")
        r = c.post("/v1/convert", params={"format": "wordcount"}, files={"file": ("memo.pdf", src)})
        assert r.status_code == 422 and "format 'wordcount': unknown" in r.text
