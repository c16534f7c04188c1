"""The convert pipeline end to end against the real stand-in vLLM server (a separate process)."""

from __future__ import annotations

import json

import ocrserve
from ocrserve.pipeline.local import Converter
from tests.support import helpers
from tests.support.pipeline_cli import _cli, _docs


def test_every_page_of_every_document_accounted_for(tmp_path, standin):
    src = _docs(tmp_path)
    out = tmp_path / "out"
    docs = [
        r.document for r in ocrserve.convert([src], output_dir=out, server=standin.url, engine="openai", concurrency=8)
    ]
    assert len(docs) == 3
    by_pages = sorted(len(d.pages) for d in docs)
    assert by_pages == [1, 2, 4]
    headers = []
    for d in docs:
        assert [p.index for p in d.pages] == list(range(len(d.pages)))
        for p in d.pages:
            assert p.status == "ok" and p.engine == "openai" and p.attempts == 1
            assert p.prompt_tokens and p.completion_tokens
            h = [b for b in p.blocks if b.label == "Section-Header"]
            assert h and h[0].text.startswith("Page ")
            headers.append(h[0].text)
            # boxes come back in the page's own coordinates (points for PDFs)
            assert all(0 <= b.bbox[2] <= p.width + 1e-6 and 0 <= b.bbox[3] <= p.height + 1e-6 for b in p.blocks)
    assert len(set(headers)) == 7  # every page answered from its own image
    assert standin.stats()["total_requests"] == 7
    # files per document, the two report.pdf kept apart
    for name in ("report", "sub/report", "scan"):
        base = name.rsplit("/", 1)[-1]
        for ext in ("md", "html", "json"):
            assert (out / name / f"{base}.{ext}").is_file(), (name, ext)
    md = (out / "report" / "report.md").read_text()
    assert md.count("# Page ") == 4 and "![" in md and (out / "report" / "images").is_dir()
    data = json.loads((out / "scan" / "scan.json").read_text())
    assert data["schema_version"] == ocrserve.SCHEMA_VERSION and data["source"]["type"] == "png"
    assert data["pages"][0]["unit"] == "px" and data["pages"][0]["width"] == 900


def test_the_request_is_what_the_model_expects(tmp_path, standin):
    pdf = helpers.text_pdf(tmp_path / "one.pdf", pages=1)
    ocrserve.convert(pdf, server=standin.url, engine="openai")
    st = standin.stats()
    # no --model: the profile of the model the server serves (the stand-in stands in for Chandra 1)
    assert st["last"]["prompt"] == ocrserve.load_profile("chandra-1").prompt  # byte for byte
    assert st["last"]["sampling"]["temperature"] == 0.0 and st["last"]["sampling"]["top_p"] == 0.1


def test_retries_connection_errors_and_loops_and_keeps_a_cut_off_answer(tmp_path, standin):
    standin.control(default_plan=["500", "drop", "loop", "cutoff"])
    pdf = helpers.text_pdf(tmp_path / "flaky.pdf", pages=3)
    (res,) = ocrserve.convert(pdf, server=standin.url, engine="openai", fallback=False)
    doc = res.document
    for p in doc.pages:
        assert p.status == "ok" and p.attempts == 4 and p.truncated and not p.looped
        assert any(b.label == "Section-Header" for b in p.blocks)
        assert p.blocks[-1].truncated
    assert standin.stats()["total_requests"] == 12
    assert doc.metadata.pages_truncated == 3 and doc.metadata.pages == 3


def test_a_cut_off_answer_makes_one_request_and_keeps_the_models_blocks(tmp_path, standin):
    standin.control(default_plan=["cutoff"])
    pdf = helpers.text_pdf(tmp_path / "dense.pdf", pages=1)
    out = tmp_path / "out"
    (res,) = ocrserve.convert(pdf, output_dir=out, server=standin.url, engine="openai")
    doc = res.document
    assert standin.stats()["total_requests"] == 1
    (p,) = doc.pages
    assert p.status == "ok" and p.engine == "openai" and p.truncated and p.attempts == 1
    assert p.blocks and all(b.origin == "engine" for b in p.blocks)
    data = json.loads((out / "dense" / "dense.json").read_text())
    assert data["pages"][0]["truncated"] is True and data["metadata"]["pages_truncated"] == 1


def test_a_page_that_still_loops_keeps_the_model_text_and_lite_fills_in_the_rest(tmp_path, standin):
    """The loop's page: the model's first block and its text before the loop are kept; lite adds only blocks
    where the model wrote nothing, marked origin=fallback; the JSON says so."""
    standin.control(default_plan=["loop"] * 10)
    pdf = helpers.text_pdf(tmp_path / "loopy.pdf", pages=1, title="Loopy")
    profile = ocrserve.load_profile("chandra-1").model_copy(update={"max_retries": 1})
    (res,) = ocrserve.convert(pdf, server=standin.url, engine="openai", model=profile)
    doc = res.document
    assert standin.stats()["total_requests"] == 2
    (p,) = doc.pages
    assert p.status == "ok" and p.looped and "still looped" in p.error
    model_blocks = [b for b in p.blocks if b.origin == "engine"]
    assert model_blocks[0].label == "Section-Header" and model_blocks[-1].text.count("the same words again") == 1
    for b in (b for b in p.blocks if b.origin == "fallback"):  # lite's blocks lie outside the model's
        for m in model_blocks:
            ix = min(b.bbox[2], m.bbox[2]) - max(b.bbox[0], m.bbox[0])
            iy = min(b.bbox[3], m.bbox[3]) - max(b.bbox[1], m.bbox[1])
            area = (b.bbox[2] - b.bbox[0]) * (b.bbox[3] - b.bbox[1])
            assert ix <= 0 or iy <= 0 or ix * iy < 0.5 * area
    assert doc.metadata.pages_looped == 1 and doc.metadata.blocks_fallback == sum(
        b.origin == "fallback" for b in p.blocks
    )


def test_unreadable_page_is_rescued_by_lite_and_marked(tmp_path, standin):
    standin.control(default_plan=["400"])  # a 4xx that no retry can fix
    pdf = helpers.text_pdf(tmp_path / "bad.pdf", pages=2, title="Rescued")
    (res,) = ocrserve.convert(pdf, server=standin.url, engine="openai")
    doc = res.document
    assert standin.stats()["total_requests"] == 2  # failed at once, no retry
    for p in doc.pages:
        assert p.status == "fallback" and p.engine == "lite"
        assert p.error and "400" in p.error
    md = ocrserve.render_markdown(doc)
    assert "Rescued page 1" in md and "Rescued page 2" in md


def test_without_fallback_failed_pages_are_marked_and_exit_code_says_so(tmp_path, standin):
    standin.control(plans={}, default_plan=["400"])
    pdf = helpers.text_pdf(tmp_path / "x.pdf", pages=2)
    out = tmp_path / "out"
    r = _cli("convert", str(pdf), "-o", str(out), "--server", standin.url, "--no-fallback", "-q")
    assert r.returncode == 1
    assert "x.pdf" in r.stderr and "page 1" in r.stderr
    data = json.loads((out / "x" / "x.json").read_text())
    assert [p["status"] for p in data["pages"]] == ["failed", "failed"]
    assert all(p["error"] for p in data["pages"])


def test_bad_files_fail_alone_with_reasons(tmp_path, standin):
    d = tmp_path / "mixed"
    d.mkdir()
    helpers.text_pdf(d / "good.pdf", pages=2)
    helpers.image(d / "good_photo.jpg", fmt="JPEG")
    (d / "corrupt.pdf").write_bytes(b"%PDF-1.4\n1 0 obj << /Type /Catalog >> garbage")
    (d / "zero.pdf").write_bytes(b"")
    helpers.encrypted_pdf(d / "locked.pdf")
    (d / "notes.pdf").write_text("this is a text file, not a PDF\n")
    helpers.huge_png(d / "huge.png")
    helpers.truncated_jpeg(d / "cut.jpg")
    out = tmp_path / "out"
    r = _cli("convert", str(d), "-o", str(out), "--server", standin.url)
    assert r.returncode == 1
    err = r.stderr
    reasons = {
        "corrupt.pdf": "corrupt",
        "zero.pdf": "empty file",
        "locked.pdf": "password",
        "notes.pdf": "not a PDF",
        "huge.png": "decompression-bomb",
        "cut.jpg": "corrupt image",
    }
    failed_lines = [ln for ln in err.splitlines() if ln.startswith("  ")]
    assert len(failed_lines) == 6, err
    for name, reason in reasons.items():
        line = next((ln for ln in failed_lines if name in ln), None)
        assert line and reason in line, (name, err)
    assert (out / "good" / "good.md").read_text().count("# Page ") == 2
    assert (out / "good_photo" / "good_photo.json").is_file()
    assert not (out / "zero").exists() and not (out / "notes").exists()
    # the encrypted one converts with its password
    r = _cli("convert", str(d / "locked.pdf"), "-o", str(out), "--server", standin.url, "--password", "secret", "-q")
    assert r.returncode == 0, r.stderr
    assert (out / "locked" / "locked.md").is_file()
    # a rerun without the password skips it like any finished document (its hash matches the output)
    r = _cli("convert", str(d / "locked.pdf"), "-o", str(out), "--server", standin.url, "--json-log")
    assert r.returncode == 0, r.stderr
    done = [json.loads(ln) for ln in r.stdout.splitlines() if '"doc_done"' in ln]
    assert [(e["status"], e["error"]) for e in done] == [("skipped", None)]
    # ...but a changed file, or --force, still needs the password
    r = _cli("convert", str(d / "locked.pdf"), "-o", str(out), "--server", standin.url, "--force", "-q")
    assert r.returncode == 1 and "password" in r.stderr


def test_page_ranges_and_stdin_list(tmp_path, standin):
    pdf = helpers.text_pdf(tmp_path / "long.pdf", pages=6)
    out = tmp_path / "out"
    r = _cli("convert", "-", "-o", str(out), "--server", standin.url, "--pages", "2-3,6", "-q", input=f"{pdf}\n")
    assert r.returncode == 0, r.stderr
    data = json.loads((out / "long" / "long.json").read_text())
    assert [p["index"] for p in data["pages"]] == [1, 2, 5]
    assert data["source"]["page_count"] == 6


async def test_async_api_and_bounded_in_flight(tmp_path, standin):
    standin.control(delay_s=0.05)
    pdf = helpers.text_pdf(tmp_path / "many.pdf", pages=24)
    docs = [
        r.document
        for r in await ocrserve.aconvert(pdf, server=standin.url, engine="openai", concurrency=4, prefetch_pages=2)
    ]
    assert len(docs[0].pages) == 24 and all(p.status == "ok" for p in docs[0].pages)
    st = standin.stats()
    assert 2 <= st["max_in_flight"] <= 4


async def test_render_stays_a_bounded_distance_ahead(tmp_path, standin):
    """With a slow server, rendered-but-unanswered pages never exceed capacity + prefetch."""
    standin.control(delay_s=0.1)
    pdf = helpers.blank_pdf(tmp_path / "blank.pdf", 30)
    ahead: list[int] = []
    conv = Converter(engine="openai", server=standin.url, concurrency=2, prefetch_pages=3)
    orig = conv.pool.run

    async def spy(fn, *a, **k):
        r = await orig(fn, *a, **k)
        if getattr(fn, "__name__", "") == "render_page":
            ahead.append(conv.slots_n)
        return r

    conv.pool.run = spy  # type: ignore[method-assign]
    inflight = {"rendered": 0, "max": 0}
    engine_ocr = conv.engine.ocr

    async def counting_ocr(page, **kw):
        inflight["rendered"] += 1
        inflight["max"] = max(inflight["max"], inflight["rendered"])
        try:
            return await engine_ocr(page, **kw)
        finally:
            inflight["rendered"] -= 1

    conv.engine.ocr = counting_ocr  # type: ignore[method-assign]
    try:
        summary = await conv.run([pdf])
    finally:
        await conv.aclose()
    assert summary.results[0].pages == 30
    assert conv.slots_n == 5 and inflight["max"] <= 5


def test_unusable_server_fails_the_run_at_once(tmp_path, standin):
    """A refused key or an unreachable server is an error of the run, not a run of fallbacks."""
    standin.control(api_key="secret")
    pdf = helpers.text_pdf(tmp_path / "k.pdf", pages=1)
    r = _cli("convert", str(pdf), "-o", str(tmp_path / "o"), "--server", standin.url, "--api-key", "wrong", "-q")
    assert r.returncode == 2 and "401" in r.stderr and "--api-key" in r.stderr
    assert not (tmp_path / "o" / "k").exists()
    r = _cli("convert", str(pdf), "-o", str(tmp_path / "o"), "--server", standin.url, "--api-key", "secret", "-q")
    assert r.returncode == 0, r.stderr
    r = _cli("convert", str(pdf), "-o", str(tmp_path / "o2"), "--server", "http://127.0.0.1:9", "-q")
    assert r.returncode == 2 and "cannot reach" in r.stderr


def test_summary_line_plurals():
    from ocrserve.cli.convert import summary_line
    from ocrserve.pipeline.results import DocResult, RunSummary

    one = RunSummary(results=[DocResult(name="a", path="a.pdf", status="ok", pages=1)], elapsed_s=2.0, documents=1)
    assert summary_line(one, "out") == "1 document: 1 ok; 1 page in 2.0s (0.50 pages/s) -> out"
    cut = RunSummary(
        results=[DocResult(name="a", path="a.pdf", status="ok", pages=2)], elapsed_s=1.0, documents=7, interrupted=True
    )
    assert summary_line(cut, "out") == "interrupted: 1 finished (1 ok), 6 left; 2 pages in 1.0s (2.00 pages/s) -> out"
    none = RunSummary(elapsed_s=0.0)
    assert summary_line(none, "o") == "0 documents: nothing to do; 0 pages in 0.0s (0.00 pages/s) -> o"
