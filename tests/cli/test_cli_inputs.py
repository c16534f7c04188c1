"""What a folder holds that cannot be read is named with its reason and fails the run (#16.1)."""

from __future__ import annotations

import json
import os
from pathlib import Path

from ocrserve.ingest.sources import InputProblem, SourceFile, expand_sources
from tests.cli.support import cli
from tests.support import helpers

# os.scandir of one folder raises PermissionError: tests run as root, and chmod 000 does not stop root
UNREADABLE_SHIM = """
import errno, os
_real_scandir = os.scandir
def _scandir(path="."):
    if os.path.basename(os.fspath(path)) == "locked":
        raise PermissionError(errno.EACCES, "Permission denied", os.fspath(path))
    return _real_scandir(path)
os.scandir = _scandir
import builtins
_real_open = builtins.open
def _open(file, *a, **kw):  # secret.pdf cannot be read (also in the forked render workers)
    if isinstance(file, (str, bytes, os.PathLike)) and os.path.basename(os.fsdecode(file)) == "secret.pdf":
        raise PermissionError(errno.EACCES, "Permission denied", os.fspath(file))
    return _real_open(file, *a, **kw)
builtins.open = _open
"""


def _folder(tmp_path: Path) -> Path:
    d = tmp_path / "in"
    (d / "sub").mkdir(parents=True)
    (d / "locked").mkdir()
    helpers.text_pdf(d / "good.pdf", pages=1, title="Good")
    helpers.text_pdf(d / "locked" / "hidden.pdf", pages=1)
    helpers.text_pdf(d / "secret.pdf", pages=1)
    (d / "dangling.pdf").symlink_to(d / "gone.pdf")
    (d / "sub" / "up").symlink_to("..")  # a folder link back to its own ancestor
    (d / "loop1").symlink_to("loop2")  # links that point at each other
    (d / "loop2").symlink_to("loop1")
    return d


EXPECTED = {
    "dangling.pdf": "dangling symlink",
    "locked": "cannot read folder: Permission denied",
    "loop1": "symlink loop",
    "loop2": "symlink loop",
    "secret.pdf": "cannot read file: Permission denied",
    "sub/up": "symlink loop",
}


def test_cli_names_each_unreadable_entry_and_fails(tmp_path):
    d = _folder(tmp_path)
    out = tmp_path / "out"
    r = cli("convert", str(d), "-o", str(out), "--engine", "lite", "--json-log", shim=UNREADABLE_SHIM)
    assert r.returncode == 1, r.stderr
    events = [json.loads(ln) for ln in r.stdout.splitlines()]
    done = {Path(e["path"]).relative_to(d).as_posix(): e for e in events if e["event"] == "doc_done"}
    assert done["good.pdf"]["status"] == "ok"
    for rel, why in EXPECTED.items():
        assert done[rel]["status"] == "failed" and why in done[rel]["error"], (rel, done[rel])
    assert set(done) == {"good.pdf", *EXPECTED}  # nothing inside the unreadable folder, nothing twice
    run_done = events[-1]
    assert run_done["event"] == "run_done" and run_done["counts"] == {"ok": 1, "failed": 6}
    assert events[0] == {"event": "run_start", "documents": 7}
    # the summary on stderr names each one with its reason
    for rel, why in EXPECTED.items():
        assert f"{d / rel}: " in r.stderr and why in r.stderr
    assert (out / "good" / "good.md").is_file()


def test_cli_progress_lines_name_them(tmp_path):
    d = _folder(tmp_path)
    r = cli("convert", str(d), "-o", str(tmp_path / "out"), "--engine", "lite", shim=UNREADABLE_SHIM)
    assert r.returncode == 1
    lines = r.stderr.splitlines()
    for rel, why in EXPECTED.items():
        # the progress line ([i/n] failed: PATH (reason)) and the failure list of the summary
        assert any(ln.startswith("[") and f"failed: {d / rel} (" in ln and why in ln for ln in lines), (rel, r.stderr)
    assert any("7 documents: 6 failed, 1 ok" in ln for ln in lines), r.stderr
    assert "6 documents failed:" in r.stderr


def test_expand_sources_keeps_problems_in_place(tmp_path, monkeypatch):
    d = tmp_path / "in"
    d.mkdir()
    helpers.text_pdf(d / "a.pdf", pages=1)
    (d / "b.pdf").symlink_to(d / "nowhere.pdf")
    (d / "noext").write_bytes(b"%PDF-1.4 not really")
    helpers.text_pdf(d / "c.pdf", pages=1)
    (d / "link").symlink_to(d)  # the folder itself
    real_open = open

    def deny(path, *a, **kw):  # an extensionless file that cannot be read (open refuses, even for root)
        if os.fspath(path).endswith("noext"):
            raise PermissionError(13, "Permission denied", os.fspath(path))
        return real_open(path, *a, **kw)

    monkeypatch.setattr("builtins.open", deny)
    items = expand_sources([d])
    monkeypatch.undo()
    kinds = [(type(i).__name__, i.path.name) for i in items]
    assert kinds == [
        ("SourceFile", "a.pdf"),
        ("InputProblem", "b.pdf"),
        ("SourceFile", "c.pdf"),
        ("InputProblem", "link"),
        ("InputProblem", "noext"),
    ]
    probs = {i.path.name: i for i in items if isinstance(i, InputProblem)}
    assert "dangling symlink" in probs["b.pdf"].reason and "nowhere.pdf" in probs["b.pdf"].reason
    assert "symlink loop" in probs["link"].reason
    assert probs["noext"].reason == "cannot read: Permission denied"
    assert all(isinstance(i, SourceFile) for i in items if i.path.suffix == ".pdf" and i.path.exists())


def test_a_folder_linked_from_elsewhere_is_walked(tmp_path):
    """A symlink to a folder outside the tree (not a loop) is followed, its documents named under the link."""
    other = tmp_path / "elsewhere"
    other.mkdir()
    helpers.text_pdf(other / "x.pdf", pages=1)
    d = tmp_path / "in"
    d.mkdir()
    (d / "shared").symlink_to(other)
    items = expand_sources([d])
    assert [(type(i).__name__, i.name) for i in items] == [("SourceFile", "shared/x")]


def test_the_ray_path_reports_them_too(tmp_path):
    """run_ray_convert turns each problem into a failed result with its doc_done (no cluster is started
    when nothing else is left to convert)."""
    from ocrserve.pipeline.ray import run_ray_convert

    d = tmp_path / "in"
    d.mkdir()
    (d / "gone.pdf").symlink_to(d / "nowhere.pdf")
    events = []
    s = run_ray_convert(
        [d], output=str(tmp_path / "out"), engine="lite", on_event=lambda k, data: events.append((k, data))
    )
    assert [(r.name, r.status) for r in s.results] == [("gone.pdf", "failed")] and s.failed
    assert "dangling symlink" in s.results[0].error
    assert [k for k, _ in events] == ["run_start", "doc_done", "run_done"]
    assert events[0][1] == {"documents": 1} and events[1][1]["result"] is s.results[0]
