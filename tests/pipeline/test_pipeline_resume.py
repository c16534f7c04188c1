"""Reruns against the real stand-in vLLM server: finished documents skipped (not when changed, or with more
pages), --force, an interrupted run resumed equal to an uninterrupted one, and output names that do not depend
on the other inputs or the run they were made in."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

from tests.support import helpers
from tests.support.pipeline_cli import ROOT, _cli, _docs, _stable


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
