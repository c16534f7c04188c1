"""A user's first week (#29.2-5), through the real command and the Python API: a rerun after a server
outage redoes the fallback's pages, a degraded or empty run says so in its exit code, a format added
later is rendered from the JSON, bad outputs and inputs are one line, and convert() returns a result
per document."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

import ocrserve
from tests.cli.support import cli
from tests.support import helpers


def _pages(out: Path, name: str) -> list[dict]:
    return json.loads((out / name / f"{name}.json").read_text())["pages"]


def test_a_rerun_redoes_the_pages_the_fallback_wrote(tmp_path, standin):
    """#29.2: pages lite rescued while the model failed them are converted again by the next run with
    the model; the degraded run exits 3 and names them, the rerun says it redoes them."""
    standin.control(default_plan=["400"])  # every page fails once: the server 'down' for the first run
    pdf = helpers.text_pdf(tmp_path / "memo.pdf", pages=2, title="Memo")
    out = tmp_path / "out"
    args = ("convert", str(pdf), "-o", str(out), "--server", standin.url)
    first = cli(*args)
    assert first.returncode == 3, first.stderr
    assert "2 pages of 1 document came from the fallback" in first.stderr and str(pdf) in first.stderr
    assert [(p["status"], p["engine"]) for p in _pages(out, "memo")] == [("fallback", "lite")] * 2

    second = cli(*args)  # the server answers now
    assert second.returncode == 0, second.stderr
    assert "redo: " in second.stderr and "2 of 2 pages came from the fallback" in second.stderr
    assert [(p["status"], p["engine"]) for p in _pages(out, "memo")] == [("ok", "openai")] * 2
    requests = standin.stats()["total_requests"]

    third = cli(*args)  # complete with model pages: skipped
    assert third.returncode == 0 and "1 skipped" in third.stderr, third.stderr
    assert standin.stats()["total_requests"] == requests


def test_a_rerun_converts_only_the_pages_the_fallback_wrote(tmp_path, standin):
    """#29.2: a rerun with the model sends only the fallback's pages to the model; the model's pages
    stay as the first run wrote them (blocks, account, figure crops) and every format is rendered
    again from the whole Document."""
    pdf = helpers.text_pdf(tmp_path / "report.pdf", pages=4, title="Report")
    # which page image is which: the stand-in's answer for an image is headed by its sha256
    probe = tmp_path / "probe"
    assert cli("convert", str(pdf), "-o", str(probe), "--server", standin.url, "--format", "json").returncode == 0
    shas = [re.search(r"Page ([0-9a-f]{12})", p["blocks"][0]["text"])[1] for p in _pages(probe, "report")]
    standin.reset(plans={shas[1]: ["400"], shas[3]: ["400"]})  # pages 2 and 4 fail once: lite writes them
    out = tmp_path / "out"
    args = ("convert", str(pdf), "-o", str(out), "--server", standin.url)
    first = cli(*args)
    assert first.returncode == 3, first.stderr
    before = _pages(out, "report")
    assert [(p["status"], p["engine"]) for p in before] == [("ok", "openai"), ("fallback", "lite")] * 2
    crops = {f: (out / "report" / f).read_bytes() for p in before[::2] for f in _figures(p)}
    assert len(crops) == 2, before  # the model's pages have a figure each
    requests = standin.stats()["total_requests"]

    second = cli(*args)  # the server answers every page now
    assert second.returncode == 0, second.stderr
    assert f"redo: {pdf} (2 of 4 pages came from the fallback: only those converted again)" in second.stderr
    # the summary's pages and pages/s are the run's own work: the 2 pages converted, the 2 kept named apart
    assert re.search(r"; 2 pages in [0-9.]+s \([0-9.]+ pages/s\), 2 kept from an earlier run -> ", second.stderr), (
        second.stderr
    )
    assert standin.stats()["total_requests"] == requests + 2  # pages 2 and 4, not the model's 1 and 3
    attempts = standin.stats()["attempts"]
    assert [sum(n for sha, n in attempts.items() if sha.startswith(s)) for s in shas] == [1, 2, 1, 2]
    after = _pages(out, "report")
    assert [(p["status"], p["engine"]) for p in after] == [("ok", "openai")] * 4
    assert after[0] == before[0] and after[2] == before[2]  # blocks, tokens, timings: as the first run wrote them
    assert {f: (out / "report" / f).read_bytes() for p in after[::2] for f in _figures(p)} == crops
    assert all((out / "report" / f).is_file() for p in after for f in _figures(p)) and len(_figures(after[1])) == 1
    doc = json.loads((out / "report" / "report.json").read_text())
    assert doc["metadata"]["pages_ok"] == 4 and doc["metadata"]["images"] == 4
    md = (out / "report" / "report.md").read_text()
    assert all(f"Page {s}" in md for s in shas) and md.count("](images/") == 4


def _figures(page: dict) -> list[str]:
    return [b["figure"] for b in page["blocks"] if b.get("figure")]


def test_lite_pages_are_the_run_s_own_not_degraded(tmp_path):
    """#29.2: with the lite engine itself (no server) its pages are ok: exit 0, and a rerun skips them."""
    pdf = helpers.text_pdf(tmp_path / "memo.pdf", pages=1)
    out = tmp_path / "out"
    for _ in range(2):
        r = cli("convert", str(pdf), "-o", str(out), "--engine", "lite")
        assert r.returncode == 0 and "redo" not in r.stderr, r.stderr
    assert "1 skipped" in r.stderr


def test_a_format_added_later_is_rendered_from_the_json(tmp_path, standin):
    """#29.3: --format pdf,chunks on a finished document sends no page to the model and keeps the
    Markdown and HTML the first run wrote; --force converts again and keeps every format it had."""
    pdf = helpers.text_pdf(tmp_path / "memo.pdf", pages=2, title="Memo")
    out = tmp_path / "out"
    base = ("convert", str(pdf), "-o", str(out), "--server", standin.url)
    assert cli(*base).returncode == 0
    folder = out / "memo"
    md_before = (folder / "memo.md").read_bytes()
    requests = standin.stats()["total_requests"]
    assert requests == 2

    added = cli(*base, "--format", "pdf,chunks")
    assert added.returncode == 0, added.stderr
    assert standin.stats()["total_requests"] == requests  # no OCR
    assert "updated: " in added.stderr and "added pdf, chunks from its JSON" in added.stderr
    names = sorted(p.name for p in folder.iterdir() if p.is_file())
    assert names == ["memo.chunks.jsonl", "memo.html", "memo.json", "memo.md", "memo.pdf"]
    assert (folder / "memo.md").read_bytes() == md_before
    assert (folder / "memo.pdf").read_bytes().startswith(b"%PDF") and (folder / "memo.chunks.jsonl").stat().st_size

    forced = cli(*base, "--format", "txt", "--force")
    assert forced.returncode == 0, forced.stderr
    assert standin.stats()["total_requests"] == requests + 2  # converted again
    names = sorted(p.name for p in folder.iterdir() if p.is_file())
    assert names == ["memo.chunks.jsonl", "memo.html", "memo.json", "memo.md", "memo.pdf", "memo.txt"]


def test_an_output_that_cannot_be_a_folder_is_one_line_and_exit_2(tmp_path):
    """#29.4: -o naming a file, or a folder that cannot be made."""
    pdf = helpers.text_pdf(tmp_path / "memo.pdf", pages=1)
    (tmp_path / "afile").write_text("not a folder")
    for out, why in ((tmp_path / "afile", "a file is there"), (tmp_path / "afile" / "sub", "cannot create")):
        r = cli("convert", str(pdf), "-o", str(out), "--engine", "lite")
        assert r.returncode == 2, r.stderr
        assert r.stderr.strip().count("\n") == 0 and f"output {out}" in r.stderr and why in r.stderr, r.stderr


def test_a_url_as_input_says_urls_are_not_supported(tmp_path):
    r = cli("convert", "https://example.com/x.pdf", "-o", str(tmp_path / "out"), "--engine", "lite")
    assert r.returncode == 2, r.stderr
    assert r.stderr.strip() == (
        "error: https://example.com/x.pdf: URLs are not supported as input; "
        "download the file first, or send it to `ocrserve api`"
    )


def test_a_folder_of_only_unsupported_files_names_them_and_exits_4(tmp_path):
    """#29.4: each file is named as skipped with its reason, and the exit code says nothing was converted."""
    d = tmp_path / "in"
    d.mkdir()
    (d / "data.xyz").write_text("1,2,3")
    (d / "notes.txt").write_text("a note")
    (d / ".hidden.xyz").write_text("left alone")
    r = cli("convert", str(d), "-o", str(tmp_path / "out"), "--engine", "lite")
    assert r.returncode == 4, r.stderr
    for name, suffix in (("data.xyz", ".xyz"), ("notes.txt", ".txt")):
        assert f"skipped: {d / name} (unsupported file type {suffix}: not PDF" in r.stderr
    assert ".hidden" not in r.stderr
    assert "nothing converted: no document to convert in the inputs (2 unsupported files skipped)" in r.stderr
    # beside a document they are named too, and the run is a success
    helpers.text_pdf(d / "memo.pdf", pages=1)
    r = cli("convert", str(d), "-o", str(tmp_path / "out"), "--engine", "lite", "--json-log")
    assert r.returncode == 0, r.stderr
    events = [json.loads(line) for line in r.stdout.splitlines()]
    done = {Path(e["path"]).name: e["status"] for e in events if e["event"] == "doc_done"}
    assert done == {"data.xyz": "unsupported", "notes.txt": "unsupported", "memo.pdf": "ok"}
    assert events[-1]["exit_code"] == 0


def test_bench_against_an_unreachable_server_is_one_line():
    r = cli("bench", "--server", "http://127.0.0.1:9", "--synthetic", "2", timeout=120)
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert r.stderr.strip().count("\n") == 0 and "cannot reach http://127.0.0.1:9" in r.stderr


def test_the_python_api_returns_a_result_per_document(tmp_path):
    """#29.5: four inputs, four results, failures included with their reasons; raising is asked for."""
    good = helpers.text_pdf(tmp_path / "good.pdf", pages=1, title="Good")
    empty = tmp_path / "empty.pdf"
    empty.write_bytes(b"")
    junk = tmp_path / "junk.pdf"
    junk.write_text("not a pdf")
    missing = tmp_path / "missing.pdf"
    results = ocrserve.convert([good, empty, junk, missing], engine="lite")
    assert [(Path(r.input).name, r.status) for r in results] == [
        ("good.pdf", "ok"),
        ("empty.pdf", "failed"),
        ("junk.pdf", "failed"),
        ("missing.pdf", "failed"),
    ]
    ok, *failed = results
    assert isinstance(ok, ocrserve.ConversionResult) and ok.ok and "Good" in ocrserve.render_markdown(ok.document)
    assert all(r.document is None and r.error and not r.ok for r in failed)
    assert "empty file" in failed[0].error and "no such file" in failed[2].error

    with pytest.raises(ocrserve.ConversionError, match=r"3 of 4 documents failed: .*empty.pdf: empty file") as e:
        ocrserve.convert([good, empty, junk, missing], engine="lite", raises_on_error=True)
    assert [r.status for r in e.value.results] == ["ok", "failed", "failed", "failed"]
    assert isinstance(e.value, ocrserve.OcrserveError)
