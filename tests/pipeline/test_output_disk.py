"""Disk and names (#29.11), through the CLI: file names of 244-250 bytes convert beside the others
(output names cut with a hash, a rerun finds them), and a document whose output cannot be written fails alone while the others convert."""

from __future__ import annotations

import json
from pathlib import Path

from tests.cli.support import cli, mkdir_fails
from tests.support.helpers import text_pdf

# the staging folder of the document `victim` cannot be made: its disk is full
SHIM = mkdir_fails("ENOSPC", 'os.path.basename(p).startswith(".victim.partial-")')


def _events(stdout: str) -> dict[str, dict]:
    return {Path(e["path"]).name: e for e in map(json.loads, stdout.splitlines()) if e["event"] == "doc_done"}


def test_long_file_names_convert_beside_the_others(tmp_path):
    src = tmp_path / "in"
    src.mkdir()
    names = ["a.pdf", "n" * 246 + ".pdf", "n" * 245 + "x.pdf", "\u00e9" * 123 + ".pdf", "z.pdf"]
    for n in names:
        assert len(n.encode()) <= 255
        text_pdf(src / n, pages=1, title="Doc")
    out = tmp_path / "out"
    args = ("convert", str(src), "-o", str(out), "--engine", "lite", "--format", "md,pdf,chunks", "--json-log")
    r = cli(*args)
    assert r.returncode == 0, r.stderr[-3000:]
    done = _events(r.stdout)
    assert {n: done[n]["status"] for n in names} == dict.fromkeys(names, "ok")
    folders = sorted(p.name for p in out.iterdir())
    assert len(folders) == len(names) and all(len(f.encode()) <= 180 for f in folders)
    for f in folders:
        assert {p.suffix for p in (out / f).iterdir()} >= {".md", ".pdf", ".json", ".jsonl"}
    r = cli(*args)  # a rerun finds each under its cut name
    assert r.returncode == 0, r.stderr[-3000:]
    assert {e["status"] for e in _events(r.stdout).values()} == {"skipped"}


def test_a_document_that_cannot_be_written_fails_alone(tmp_path):
    src = tmp_path / "in"
    src.mkdir()
    for n in ("first", "victim", "last"):
        text_pdf(src / f"{n}.pdf", pages=1)
    out = tmp_path / "out"
    r = cli("convert", str(src), "-o", str(out), "--engine", "lite", "--json-log", shim=SHIM)
    assert r.returncode == 1, r.stderr
    assert "Traceback" not in r.stderr
    done = _events(r.stdout)
    assert done["first.pdf"]["status"] == done["last.pdf"]["status"] == "ok"
    assert done["victim.pdf"]["status"] == "failed"
    assert done["victim.pdf"]["error"].startswith("cannot write output: No space left on device")
    assert sorted(p.name for p in out.iterdir()) == ["first", "last"]
