"""`ocrserve convert --ray` on a local Ray instance: same files as the local pipeline, killed workers'
pages redone, nothing lost, resumable, fsspec output.

One Ray instance (2 CPUs) for the module. Engines used: a stub engine (deterministic Chandra answer
from the page image, see tests.fakes.standin.chandra_output), the `lite` engine, and the `openai` engine
against the stand-in vLLM server (the engines, the Ray instance and the helpers: tests.support.ray_convert).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from ocrserve.profiles import load_profile
from tests.support.helpers import image, text_pdf
from tests.support.ray_convert import (
    KillingEngine,
    StubEngine,
    _strip_timings,
    assert_same_outputs,
    run_local,
    run_ray,
    tree,
)
from tests.support.ray_convert import crash_marker as crash_marker
from tests.support.ray_convert import ray_local as ray_local


@pytest.fixture(scope="module")
def docs(tmp_path_factory) -> Path:
    """A folder of documents: multi-page PDFs (one in a subfolder), images, and an unreadable file."""
    d = tmp_path_factory.mktemp("ray-docs")
    text_pdf(d / "report.pdf", pages=3, title="Report")
    text_pdf(d / "memo.pdf", pages=2, title="Memo")
    (d / "sub").mkdir()
    text_pdf(d / "sub" / "letter.pdf", pages=1, title="Letter")
    image(d / "scan.png", size=(900, 700), text="Scanned page")
    image(d / "photo.jpg", size=(640, 800), text="Photo", fmt="JPEG")
    (d / "broken.pdf").write_bytes(b"%PDF-1.7\nthis is not a pdf at all")
    return d


# ------------------------------------------------------------------------------------- tests


@pytest.fixture(scope="module")
def local_stub(docs, tmp_path_factory):
    """The local pipeline's output for `docs` with the stub engine (the reference)."""
    out = tmp_path_factory.mktemp("local-stub")
    summary = run_local([docs], out, StubEngine(load_profile("chandra-1")))
    return summary, tree(out)


def test_same_files_as_local_pipeline_stub_engine(ray_local, docs, local_stub, tmp_path):
    local, local_files = local_stub
    events: list[str] = []
    closed = tmp_path / "closed"
    closed.mkdir()
    dist = run_ray(
        [docs], tmp_path / "ray", StubEngine, on_event=lambda kind, data: events.append(kind), closed_dir=str(closed)
    )
    assert dist.counts() == local.counts() == {"ok": 5, "failed": 1}
    assert dist.pages == local.pages == 3 + 2 + 1 + 1 + 1
    broken = [r for r in dist.results if r.status == "failed"]
    assert [r.name for r in broken] == ["broken"] and "PDF" in broken[0].error
    assert [r.name for r in dist.results] == [r.name for r in local.results]
    assert_same_outputs(local_files, tree(tmp_path / "ray"))
    assert (tmp_path / "ray" / "sub" / "letter" / "letter.md").is_file()
    assert events[0] == "run_start" and events[-1] == "run_done"
    assert events.count("page_done") == 8 and events.count("doc_done") == 6 and events.count("doc_start") == 5
    for _ in range(300):  # Ray retires the engine actor after the run; it closes its engine then
        if any(closed.iterdir()):
            break
        time.sleep(0.1)
    assert [int(p.name) != os.getpid() for p in closed.iterdir()] == [True]


def test_killed_engine_worker_pages_are_redone(ray_local, docs, local_stub, tmp_path):
    """The engine actor kills its own process on page 2 of every document that has one; Ray restarts it
    and reruns the batch; every page comes back once and the files match the local run."""
    _, local_files = local_stub
    markers = tmp_path / "markers"
    markers.mkdir()
    dist = run_ray([docs], tmp_path / "ray", KillingEngine, kill_pages=[1], marker_dir=str(markers))
    killed = sorted(p.name for p in markers.iterdir())
    assert killed == ["memo-1", "report-1"]  # the kills did happen (the test can fail)
    assert all(int(p.read_text()) != os.getpid() for p in markers.iterdir())
    assert dist.counts() == {"ok": 5, "failed": 1} and dist.pages == 8
    assert_same_outputs(local_files, tree(tmp_path / "ray"))


def test_a_file_that_crashes_the_renderer_fails_alone(ray_local, docs, local_stub, crash_marker, tmp_path):
    """Rendering crashy.pdf (2 pages, mixed into blocks with other documents' pages) and opening
    crashopen.pdf kill the process every time. The run completes: those two documents fail with the
    crash as their reason (as in a local run), every other document gets the same files as before."""
    _, local_files = local_stub
    extra = tmp_path / "extra"
    extra.mkdir()
    text_pdf(extra / "crashy.pdf", pages=2, title="Crashy")
    text_pdf(extra / "crashopen.pdf", pages=1, title="Crash on open")
    crash_marker.write_text("render:crashy.pdf open:crashopen.pdf")
    try:
        dist = run_ray([docs, extra], tmp_path / "ray", StubEngine)
    finally:
        crash_marker.unlink()
    kills = Path(str(crash_marker) + ".log").read_text().split()
    Path(str(crash_marker) + ".log").unlink()
    assert {k.rsplit(":", 1)[0] for k in kills} == {"render:crashy.pdf", "open:crashopen.pdf"}  # the crashes happened
    assert all(int(k.rsplit(":", 1)[1]) != os.getpid() for k in kills)

    by = {r.name: r for r in dist.results}
    assert {n: r.status for n, r in by.items()} == {
        "broken": "failed",
        "crashopen": "failed",
        "crashy": "failed",
        "memo": "ok",
        "photo": "ok",
        "report": "ok",
        "scan": "ok",
        "sub/letter": "ok",
    }
    assert by["crashopen"].error == "the worker process crashed on this document (twice)"
    assert by["crashy"].pages == 2 and by["crashy"].pages_failed == 2
    assert by["crashy"].error.split("; ") == [
        f"page {i}: render: the worker process crashed on this document (twice)" for i in (1, 2)
    ]
    files = tree(tmp_path / "ray")
    crashy = json.loads(files.pop("crashy/crashy.json"))
    assert [p["status"] for p in crashy["pages"]] == ["failed"] * 2
    assert_same_outputs(local_files, {k: v for k, v in files.items() if not k.startswith("crashy/")})


def test_resume_and_fsspec_output(ray_local, docs, local_stub):
    """Output to an fsspec URL (memory://, written by the driver only); a rerun skips complete documents,
    a removed or failed output is redone."""
    import fsspec

    _, local_files = local_stub
    fs = fsspec.filesystem("memory")
    url = "memory://ray-resume/out"
    first = run_ray([docs], url, StubEngine)
    assert first.counts() == {"ok": 5, "failed": 1}
    root = "/ray-resume/out"
    remote = {p[len(root) + 1 :]: fs.cat_file(p) for p in sorted(fs.find(root))}
    assert_same_outputs(local_files, remote)

    # rerun: all complete documents are skipped, the unreadable one fails again
    again = run_ray([docs], url, StubEngine)
    assert again.counts() == {"skipped": 5, "failed": 1} and again.pages == 0

    # a removed output and an output with a failed page are redone; the rest stays skipped
    fs.rm(f"{root}/memo", recursive=True)
    js = f"{root}/scan/scan.json"
    data = json.loads(fs.cat_file(js))
    data["pages"][0]["status"] = "failed"
    fs.pipe_file(js, json.dumps(data).encode())
    third = run_ray([docs], url, StubEngine)
    by = {r.name: r.status for r in third.results}
    assert by == {
        "broken": "failed",
        "memo": "ok",
        "photo": "skipped",
        "report": "skipped",
        "scan": "ok",
        "sub/letter": "skipped",
    }
    assert json.loads(fs.cat_file(js))["pages"][0]["status"] == "ok"
    forced = run_ray([docs], url, StubEngine, force=True)
    assert forced.counts() == {"ok": 5, "failed": 1}


def test_lite_engine_same_files_as_local(ray_local, docs, tmp_path):
    inputs = [docs / "report.pdf", docs / "memo.pdf", docs / "scan.png"]
    local = run_local(inputs, tmp_path / "local", "lite")
    dist = run_ray(inputs, tmp_path / "ray", "lite")
    assert local.counts() == dist.counts() == {"ok": 3}
    a, b = tree(tmp_path / "local"), tree(tmp_path / "ray")
    assert sorted(a) == sorted(b) and len(a) == 9
    for k in a:
        if k.endswith(".json"):
            assert _strip_timings(json.loads(a[k])) == _strip_timings(json.loads(b[k])), k
        else:
            assert a[k] == b[k], k
    assert b"Report page 2" in b["report/report.md"]  # the lite engine read the text layer
    assert json.loads(b["report/report.json"])["model"] == "lite"


def test_cli_ray_with_standin_server(ray_local, docs, local_stub, standin, tmp_path):
    """`ocrserve convert --ray auto --server URL`: the openai engine in the actors against the stand-in
    vLLM server gives the same files as the local pipeline against it."""
    from typer.testing import CliRunner

    from ocrserve.cli import app

    local = run_local([docs], tmp_path / "local", "openai", server=standin.url)
    assert local.counts() == {"ok": 5, "failed": 1}
    local_requests = standin.stats()["total_requests"]
    assert local_requests >= 8
    url = f"file://{tmp_path}/ray"  # an fsspec URL, printed as given (not collapsed to file:/...)
    res = CliRunner().invoke(app, ["convert", str(docs), "-o", url, "--server", standin.url, "--ray", "auto"])
    assert res.exit_code == 1, res.output  # the unreadable document fails, the others are converted
    done = [ln for ln in res.output.splitlines() if " documents: " in ln][-1]
    assert done.startswith("6 documents: 1 failed, 5 ok; 8 pages in ") and done.endswith(f"-> {url}"), done
    assert standin.stats()["total_requests"] >= local_requests + 8
    assert_same_outputs(tree(tmp_path / "local"), tree(tmp_path / "ray"))
    md = (tmp_path / "ray" / "report" / "report.md").read_text()
    assert "Page " in md and "Quarter" in md
