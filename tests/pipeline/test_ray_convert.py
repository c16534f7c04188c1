"""`ocrserve convert --ray` on a local Ray instance: same files as the local pipeline, killed workers'
pages redone, nothing lost, resumable, fsspec output.

One Ray instance (2 CPUs) for the module. Engines used: a stub engine (deterministic Chandra answer
from the page image, see tests.fakes.standin.chandra_output), the `lite` engine, and the `openai` engine
against the stand-in vLLM server. The engine classes below are imported by the Ray workers
(PYTHONPATH is set to the repository root for them).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import time
from pathlib import Path

import pytest
import ray

from ocrserve.engines import Engine, EngineResult, PageInput
from ocrserve.pipeline.local import Converter
from ocrserve.profiles import load_profile
from ocrserve.settings import Settings
from tests.fakes.standin import chandra_output
from tests.support.helpers import image, text_pdf

ROOT = Path(__file__).resolve().parents[2]


# ------------------------------------------------------------------------------ test engines


class StubEngine(Engine):
    """Answers the stand-in's deterministic Chandra output for each page image (never fails)."""

    name = "stub"

    def __init__(self, profile, settings=None, **options) -> None:
        self.profile = load_profile(profile)
        self.options = options

    def capacity(self) -> int:
        return 4

    async def ocr(self, page: PageInput, *, on_delta=None) -> EngineResult:
        await asyncio.sleep(0)
        w, h = page.image_size
        raw = chandra_output(hashlib.sha256(page.png_bytes()).hexdigest(), w, h)
        return EngineResult(
            raw=raw,
            ok=True,
            engine=self.name,
            finish_reason="stop",
            prompt_tokens=100 + page.index,
            completion_tokens=len(raw) // 4,
        )

    async def aclose(self) -> None:
        if self.options.get("closed_dir"):  # the actor closed its engine when Ray retired it
            (Path(self.options["closed_dir"]) / str(os.getpid())).write_text("closed")


class KillingEngine(StubEngine):
    """Kills its own process (os._exit) the first time it sees a chosen page, tracked by a marker file."""

    async def ocr(self, page: PageInput, *, on_delta=None) -> EngineResult:
        if page.index in self.options["kill_pages"]:
            marker = Path(self.options["marker_dir"]) / f"{page.doc_id.replace('/', '_')}-{page.index}"
            if not marker.exists():
                marker.write_text(str(os.getpid()))
                os._exit(1)  # the actor dies mid-batch, as a crashed worker or a lost node would
        return await super().ocr(page)


class GiveUpEngine(StubEngine):
    """Gives up on every second page (index 1, 3, ...), as a model that loops would: the lite fallback rescues it."""

    name = "giveup"

    async def ocr(self, page: PageInput, *, on_delta=None) -> EngineResult:
        if page.index % 2 == 1:
            return EngineResult(
                ok=False,
                engine=self.name,
                attempts=3,
                finish_reason="loop",
                error="gave up after 3 attempts (3 answers unusable); last: a loop",
            )
        return await super().ocr(page)


# ---------------------------------------------------------------------------------- fixtures


# Installed in every Ray worker process and every child they start (a sitecustomize on their
# PYTHONPATH): while the marker file lists "render:NAME" / "open:NAME", rendering / opening the file
# NAME kills the process (os._exit), as a file that crashes pdfium does. Each kill is logged.
CRASH_HOOK = """
import os

_marker = os.environ.get("OCRSERVE_TEST_CRASH_MARKER")
if _marker:
    import ocrserve.ingest.raster as _render

    def _hooked(stage, fn):
        def wrapper(path, *args, **kwargs):
            try:
                with open(_marker) as f:
                    wanted = f.read().split()
            except FileNotFoundError:
                wanted = []
            if f"{stage}:{os.path.basename(path)}" in wanted:
                with open(_marker + ".log", "a") as f:
                    f.write(f"{stage}:{os.path.basename(path)}:{os.getpid()}\\n")
                os._exit(1)
            return fn(path, *args, **kwargs)

        wrapper.__module__, wrapper.__name__, wrapper.__qualname__ = fn.__module__, fn.__name__, fn.__qualname__
        return wrapper

    _render.render_page = _hooked("render", _render.render_page)
    _render.open_source = _hooked("open", _render.open_source)
"""


@pytest.fixture(scope="module")
def crash_marker(tmp_path_factory) -> Path:
    hook = tmp_path_factory.mktemp("ray-hook")
    (hook / "sitecustomize.py").write_text(CRASH_HOOK)
    return hook / "crash-marker"


@pytest.fixture(scope="module")
def ray_local(crash_marker):
    if ray.is_initialized():
        ray.shutdown()
    path = os.pathsep.join([str(ROOT), str(crash_marker.parent), os.environ.get("PYTHONPATH", "")])
    env = {"PYTHONPATH": path, "RAY_DEDUP_LOGS": "0", "OCRSERVE_TEST_CRASH_MARKER": str(crash_marker)}
    ray.init(
        num_cpus=2,
        include_dashboard=False,
        log_to_driver=False,
        configure_logging=False,
        runtime_env={"env_vars": env},
        object_store_memory=200 * 1024 * 1024,
    )
    yield ray
    ray.shutdown()


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


def _settings() -> Settings:
    return Settings(render_workers=1, lite_workers=1)


def run_local(inputs, out: Path, engine, **kw):
    async def main():
        async with Converter(engine=engine, output_dir=out, settings=_settings(), **kw) as conv:
            return await conv.run(inputs)

    return asyncio.run(main())


def run_ray(inputs, out, engine, **kw):
    from ocrserve.pipeline.options import ConvertOptions
    from ocrserve.pipeline.ray import _RAY_KEYWORDS, run_ray_convert

    kw.setdefault("ray_progress", False)
    if not isinstance(engine, str):
        kw.setdefault("model", "chandra-1")  # the stub engines answer as Chandra 1 (the local runs' say so)
    # the test engines' own options (kill_pages, closed_dir, ...) go to the engine as engine options
    own = {
        k: kw.pop(k)
        for k in list(kw)
        if k not in ConvertOptions.model_fields and k not in _RAY_KEYWORDS and k != "on_event"
    }
    return run_ray_convert(inputs, output=out, engine=engine, settings=_settings(), engine_options=own, **kw)


def _strip_timings(data):
    if isinstance(data, dict):
        return {k: _strip_timings(v) for k, v in data.items() if k != "timings"}
    if isinstance(data, list):
        return [_strip_timings(v) for v in data]
    return data


def tree(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def assert_same_outputs(local: dict[str, bytes], dist: dict[str, bytes]) -> None:
    """Same files; Markdown, HTML and figure crops byte for byte, JSON equal minus timings."""
    assert sorted(local) == sorted(dist)
    assert any(k.endswith(".md") for k in local) and any("/images/" in k for k in local)
    for k in local:
        if k.endswith(".json"):
            assert _strip_timings(json.loads(local[k])) == _strip_timings(json.loads(dist[k])), k
        else:
            assert local[k] == dist[k], k


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


def test_local_and_ray_write_the_same_files_for_every_option_that_changes_output(ray_local, tmp_path):
    """One pipeline, two schedulers: the same sequence of runs into two output folders, one run locally
    and one on Ray, leaves the same files after every step: a page selection, a wider selection later
    (the document is redone, not kept at 1 page), a same-named file from elsewhere (it gets a hashed
    name, the first keeps its output), pages rescued by the fallback (converted again by every rerun with
    the model, #29.2), a rerun that skips, the same files again beside others (their names do not
    change), a folder named like a document, and formats added from the JSON (#29.3)."""
    a, b = tmp_path / "in-a", tmp_path / "in-b"
    a.mkdir(), b.mkdir()
    text_pdf(a / "report.pdf", pages=3, title="Report A")
    image(a / "scan.png", size=(900, 700), text="Scanned page")
    text_pdf(b / "report.pdf", pages=2, title="Report B")  # same name, another file
    outs = {"local": tmp_path / "out-local", "ray": tmp_path / "out-ray"}

    def both(inputs, **kw):
        res = {
            "local": run_local(inputs, outs["local"], GiveUpEngine(load_profile("chandra-1")), **kw),
            "ray": run_ray(inputs, outs["ray"], GiveUpEngine, **kw),
        }
        assert_same_outputs(tree(outs["local"]), tree(outs["ray"]))
        assert [(r.name, r.status) for r in res["local"].results] == [(r.name, r.status) for r in res["ray"].results]
        return res["local"]

    first = both([a], pages="1")
    assert {r.name: r.status for r in first.results} == {"report": "ok", "scan": "ok"}
    pages = json.loads((outs["ray"] / "report" / "report.json").read_text())["pages"]
    assert [p["index"] for p in pages] == [0]

    wider = both([a], pages="1-2")  # the drift of old: Ray kept the 1-page output here
    assert {r.name: r.status for r in wider.results} == {"report": "fallback", "scan": "skipped"}
    pages = json.loads((outs["ray"] / "report" / "report.json").read_text())["pages"]
    assert [(p["index"], p["status"]) for p in pages] == [(0, "ok"), (1, "fallback")]

    other = both([b / "report.pdf"])
    (renamed,) = [r.name for r in other.results]
    assert renamed.startswith("report-") and (outs["ray"] / renamed / f"{renamed}.json").is_file()
    assert json.loads((outs["ray"] / "report" / "report.json").read_text())["source"]["path"].endswith(
        "in-a/report.pdf"
    )  # the first document keeps its output

    # report's page 2 came from the fallback: a run with the model converts it again (GiveUpEngine gives up
    # again), and only it: page 1, the model's, is kept as it was, timings included
    kept = {k: json.loads((o / "report" / "report.json").read_text())["pages"][0] for k, o in outs.items()}
    rerun = both([a], pages="1-2")
    assert {r.name: (r.status, r.redo) for r in rerun.results} == {
        "report": ("fallback", "1 of 2 pages came from the fallback: only those converted again"),
        "scan": ("skipped", None),
    }
    assert {k: json.loads((o / "report" / "report.json").read_text())["pages"][0] for k, o in outs.items()} == kept
    assert [(r.name, r.status) for r in both([b / "report.pdf"]).results] == [(renamed, "fallback")]  # redone too
    # the same files beside others, in another input order: the same names, skipped (names once
    # depended on the input list: a's report became report-<hash> beside b's); a folder named like
    # a document (c/report/x.pdf beside OUT/report/) is put beside it, under a hashed folder
    c = tmp_path / "in-c"
    (c / "report").mkdir(parents=True)
    text_pdf(c / "report" / "x.pdf", pages=1, title="Inner")
    mixed = both([c, b / "report.pdf", a], pages="1-2")
    assert [(r.name, r.status) for r in mixed.results][1:] == [
        (renamed, "fallback"),
        ("report", "fallback"),
        ("scan", "skipped"),
    ]
    (inner, status) = (mixed.results[0].name, mixed.results[0].status)
    assert inner.startswith("report-") and inner.endswith("/x") and status == "ok"
    assert (outs["ray"] / inner / "x.json").is_file() and (outs["ray"] / "report" / "report.json").is_file()
    # a format not written yet is rendered from the JSON (scan), or written with the document redone (report)
    more = both([a], pages="1-2", formats="md,html,pdf,chunks")
    assert {r.name: r.status for r in more.results} == {"report": "fallback", "scan": "updated"}
    assert (outs["ray"] / "report" / "report.pdf").is_file() and (outs["ray"] / "scan" / "scan.chunks.jsonl").is_file()
