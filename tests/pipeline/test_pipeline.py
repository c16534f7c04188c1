"""The convert pipeline end to end against the real stand-in vLLM server (a separate process)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import ocrserve
from ocrserve.pipeline.local import Converter
from tests.support import helpers

ROOT = Path(__file__).resolve().parents[2]


def _cli(*args: str, timeout: float = 240, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "ocrserve", *args], cwd=ROOT, capture_output=True, text=True, timeout=timeout, **kw
    )


def _docs(tmp_path: Path) -> Path:
    d = tmp_path / "in"
    (d / "sub").mkdir(parents=True)
    helpers.text_pdf(d / "report.pdf", pages=4, title="Report")
    helpers.text_pdf(d / "sub" / "report.pdf", pages=2, title="Other")  # same name, other folder
    helpers.image(d / "scan.png", size=(900, 1200), text="a scan")
    return d


def _stable(doc_json: dict) -> dict:
    """A document's JSON without what changes from run to run (timings, absolute temp paths)."""
    doc = json.loads(json.dumps(doc_json))
    doc["source"].pop("path", None)
    for p in doc["pages"]:
        p.pop("timings", None)
    return doc


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


def test_rerun_skips_finished_documents_and_force_redoes(tmp_path, standin):
    src = _docs(tmp_path)
    out = tmp_path / "out"
    r = _cli("convert", str(src), "-o", str(out), "--server", standin.url, "--json-log")
    assert r.returncode == 0, r.stderr
    n = standin.stats()["total_requests"]
    assert n == 7
    r = _cli("convert", str(src), "-o", str(out), "--server", standin.url, "--json-log")
    assert r.returncode == 0
    done = [json.loads(ln) for ln in r.stdout.splitlines() if '"doc_done"' in ln]
    assert [d["status"] for d in done] == ["skipped"] * 3
    assert standin.stats()["total_requests"] == n
    # a changed source is not "finished"
    helpers.text_pdf(src / "report.pdf", pages=1, title="Changed")
    r = _cli("convert", str(src), "-o", str(out), "--server", standin.url, "--json-log")
    done = {json.loads(ln)["name"]: json.loads(ln)["status"] for ln in r.stdout.splitlines() if '"doc_done"' in ln}
    assert done == {"report": "ok", "sub/report": "skipped", "scan": "skipped"}
    r = _cli("convert", str(src), "-o", str(out), "--server", standin.url, "--json-log", "--force")
    done = [json.loads(ln)["status"] for ln in r.stdout.splitlines() if '"doc_done"' in ln]
    assert done == ["ok"] * 3


def test_interrupted_then_resumed_equals_uninterrupted(tmp_path, standin):
    src = tmp_path / "in"
    src.mkdir()
    for i in range(6):
        helpers.text_pdf(src / f"d{i}.pdf", pages=2, title=f"Doc{i}")
    full, resumed = tmp_path / "full", tmp_path / "resumed"
    r = _cli("convert", str(src), "-o", str(full), "--server", standin.url, "-q")
    assert r.returncode == 0, r.stderr
    standin.control(delay_s=0.4)
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "ocrserve",
            "convert",
            str(src),
            "-o",
            str(resumed),
            "--server",
            standin.url,
            "--json-log",
            "-c",
            "2",
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    # wait for the first finished document, then interrupt as Ctrl-C would
    for line in proc.stdout:
        if '"doc_done"' in line:
            break
    proc.send_signal(signal.SIGINT)
    rest = proc.communicate(timeout=60)[0]
    assert proc.returncode == 130
    finished = [p for p in resumed.iterdir() if not p.name.startswith(".")]
    assert 1 <= len(finished) < 6
    assert not [p for p in resumed.iterdir() if ".partial-" in p.name]  # nothing half-written left
    (run_done,) = [json.loads(ln) for ln in rest.splitlines() if '"run_done"' in ln]
    assert run_done["interrupted"] and run_done["documents"] == 6
    assert run_done["finished"] == len(finished) and run_done["left"] == 6 - len(finished), (rest, finished)
    standin.control(delay_s=0.0)
    before = standin.stats()["total_requests"]
    r = _cli("convert", str(src), "-o", str(resumed), "--server", standin.url, "--json-log")
    assert r.returncode == 0, r.stderr
    statuses = [json.loads(ln)["status"] for ln in r.stdout.splitlines() if '"doc_done"' in ln]
    assert statuses.count("skipped") == len(finished)
    assert standin.stats()["total_requests"] - before == 2 * (6 - len(finished))
    for i in range(6):
        a, b = full / f"d{i}", resumed / f"d{i}"
        assert (a / f"d{i}.md").read_text() == (b / f"d{i}.md").read_text()
        assert (a / f"d{i}.html").read_text() == (b / f"d{i}.html").read_text()
        assert _stable(json.loads((a / f"d{i}.json").read_text())) == _stable(
            json.loads((b / f"d{i}.json").read_text())
        )
        assert sorted(p.name for p in (a / "images").iterdir()) == sorted(p.name for p in (b / "images").iterdir())


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


def test_rerun_with_more_pages_is_not_skipped(tmp_path, standin):
    pdf = helpers.text_pdf(tmp_path / "p.pdf", pages=3)
    out = tmp_path / "out"
    r = _cli("convert", str(pdf), "-o", str(out), "--server", standin.url, "--pages", "1", "-q")
    assert r.returncode == 0, r.stderr
    r = _cli("convert", str(pdf), "-o", str(out), "--server", standin.url, "--json-log")
    done = [json.loads(ln) for ln in r.stdout.splitlines() if '"doc_done"' in ln]
    assert done[0]["status"] == "ok" and done[0]["pages"] == 3
    r = _cli("convert", str(pdf), "-o", str(out), "--server", standin.url, "--pages", "2-3", "--json-log")
    done = [json.loads(ln) for ln in r.stdout.splitlines() if '"doc_done"' in ln]
    assert done[0]["status"] == "skipped"  # those pages are there


def test_same_name_from_another_file_in_a_later_run_keeps_both(tmp_path, standin):
    (tmp_path / "d1").mkdir()
    (tmp_path / "d2").mkdir()
    a = helpers.text_pdf(tmp_path / "d1" / "report.pdf", pages=1, title="First")
    b = helpers.text_pdf(tmp_path / "d2" / "report.pdf", pages=1, title="Second")
    out = tmp_path / "out"
    assert _cli("convert", str(a), "-o", str(out), "--server", standin.url, "-q").returncode == 0
    assert _cli("convert", str(b), "-o", str(out), "--server", standin.url, "-q").returncode == 0
    docs = sorted(p.name for p in out.iterdir() if not p.name.startswith("."))
    assert len(docs) == 2 and "report" in docs
    sources = {json.loads((out / d / f"{d}.json").read_text())["source"]["path"] for d in docs}
    assert sources == {str(a), str(b)}
    # the first file again: recognised, skipped
    r = _cli("convert", str(a), "-o", str(out), "--server", standin.url, "--json-log")
    assert '"status": "skipped"' in r.stdout


def test_a_files_output_name_does_not_depend_on_the_other_inputs(tmp_path, standin):
    """`convert a/` then `convert a/ b/report.pdf`: a's report keeps its name and is skipped, b's gets
    a hashed one; a rerun with the inputs the other way round, or b alone, changes nothing."""
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    helpers.text_pdf(tmp_path / "a" / "report.pdf", pages=1, title="First")
    b = helpers.text_pdf(tmp_path / "b" / "report.pdf", pages=1, title="Second")
    out = tmp_path / "out"

    def run(*inputs: Path) -> list[tuple[str, str]]:
        r = _cli("convert", *map(str, inputs), "-o", str(out), "--server", standin.url, "--json-log")
        assert r.returncode == 0, r.stderr
        return [
            (d["name"], d["status"]) for d in map(json.loads, r.stdout.splitlines()) if d.get("event") == "doc_done"
        ]

    assert run(tmp_path / "a") == [("report", "ok")]
    ((hashed, status),) = run(tmp_path / "a", b)[1:]
    assert hashed.startswith("report-") and status == "ok"
    assert run(tmp_path / "a", b)[0] == ("report", "skipped")
    assert run(b, tmp_path / "a") == [(hashed, "skipped"), ("report", "skipped")]
    assert run(tmp_path / "b") == [(hashed, "skipped")]
    assert sorted(p.name for p in out.iterdir() if not p.name.startswith(".")) == sorted(["report", hashed])
    assert json.loads((out / "report" / "report.json").read_text())["source"]["path"] == str(
        tmp_path / "a" / "report.pdf"
    )


async def test_cancelling_the_python_api_raises_and_keeps_nothing_half_written(tmp_path, standin):
    import asyncio

    standin.control(delay_s=1.0)
    pdf = helpers.text_pdf(tmp_path / "slow.pdf", pages=4)
    with pytest.raises(asyncio.TimeoutError):
        await asyncio.wait_for(
            ocrserve.aconvert(pdf, output_dir=tmp_path / "o", server=standin.url, engine="openai"), 0.5
        )
    assert not list((tmp_path / "o").iterdir())  # no document, no staging folder


def test_a_running_conversion_keeps_its_staging_folder(tmp_path):
    """clean_stale_staging removes what dead runs left, never the folder of a live run."""
    from ocrserve.pipeline.output import clean_stale_staging, staging_dir

    out = tmp_path / "out"
    live = staging_dir(out, "doc", "abc")  # this process: alive
    live.mkdir(parents=True)
    dead = out / ".other.partial-def-999999999"
    dead.mkdir()
    clean_stale_staging(out)
    assert live.is_dir() and not dead.exists()


def _render_hanging_on_hang(path, *args, **kwargs):
    """render_page, except that it never returns for a file named hang* (a PDF pdfium loops on)."""
    from ocrserve.ingest.raster import render_page

    if Path(path).name.startswith("hang"):
        time.sleep(3600)
    return render_page(path, *args, **kwargs)


def test_a_document_that_hangs_the_renderer_fails_alone_with_a_timeout(tmp_path, monkeypatch):
    import ocrserve.pipeline.local as pipeline

    monkeypatch.setattr(pipeline, "render_page", _render_hanging_on_hang)  # forked workers see it too
    monkeypatch.setenv("OCRSERVE_RENDER_TIMEOUT_S", "1.5")
    d = tmp_path / "in"
    d.mkdir()
    helpers.text_pdf(d / "good.pdf", pages=2, title="Good")
    helpers.text_pdf(d / "hang.pdf", pages=1, title="Hang")
    helpers.text_pdf(d / "later.pdf", pages=1, title="Later")

    async def main():
        conv = Converter(engine="lite", output_dir=tmp_path / "out", render_workers=2)
        try:
            return await conv.run([str(d)])
        finally:
            await conv.aclose()

    import asyncio

    t0 = time.monotonic()
    summary = asyncio.run(main())
    assert time.monotonic() - t0 < 120
    by_name = {r.name: r for r in summary.results}
    assert by_name["good"].status == "ok" and by_name["later"].status == "ok"
    hang = by_name["hang"]
    assert hang.status != "ok"
    page = hang.document.pages[0] if hang.document else None
    reason = (page.error if page else None) or hang.error or ""
    assert "timed out after 1.5 s (twice)" in reason, (hang, page)
    assert "Good" in (tmp_path / "out" / "good" / "good.md").read_text()


@pytest.mark.parametrize("gap_s", [0.4, 0.05])
def test_a_second_ctrl_c_still_counts_and_cleans_up(tmp_path, standin, gap_s):
    """Two SIGINTs in a row (an impatient user): the summary still counts what is on disk, says what is
    left, and no staging folder stays behind; a second one that lands while the process exits (0.05 s:
    the stop is that quick) does not turn exit code 130 into death by SIGINT."""
    src = tmp_path / "in"
    src.mkdir()
    for i in range(7):
        helpers.text_pdf(src / f"d{i}.pdf", pages=2, title=f"Doc{i}")
    out = tmp_path / "out"
    standin.control(delay_s=0.5)
    proc = subprocess.Popen(
        [sys.executable, "-m", "ocrserve", "convert", str(src), "-o", str(out), "--server", standin.url, "-c", "3"],
        cwd=ROOT,
        stderr=subprocess.PIPE,
        text=True,
        stdout=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not any(
        p.name.startswith("d") for p in (out.iterdir() if out.is_dir() else [])
    ):
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    time.sleep(gap_s)  # a second Ctrl-C while the run stops, or while the process exits
    proc.send_signal(signal.SIGINT)
    err = proc.communicate(timeout=60)[1]
    assert proc.returncode == 130, err
    finished = sorted(p.name for p in out.iterdir() if not p.name.startswith("."))
    assert not [p for p in out.iterdir() if p.name.startswith(".")], list(out.iterdir())
    line = next(ln for ln in err.splitlines() if ln.startswith("interrupted: "))
    n = len(finished)
    assert line.startswith(f"interrupted: {n} finished ({n} ok), {7 - n} left; "), (line, finished)
    assert "Traceback" not in err, err


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
