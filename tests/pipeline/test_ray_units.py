"""Parts of the Ray conversion that need no cluster: the in-process vLLM engine's batching and retries
(a fake vllm.LLM), the driver's assembly (lost or duplicated pages), output targets."""

from __future__ import annotations

import asyncio
import hashlib
import io
import json
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from PIL import Image

from ocrserve.document import Page
from ocrserve.engines import PageInput
from ocrserve.engines.vllm import VLLMEngine
from ocrserve.pipeline.local import RunSummary
from ocrserve.pipeline.target import OutputTarget, normalize_target
from ocrserve.profiles import load_profile
from tests.fakes.standin import chandra_output
from tests.support.helpers import pid_gone


def _page(i: int, doc: str = "d") -> PageInput:
    img = Image.new("RGB", (64, 64), (i * 40 % 256, 10, 10))
    buf = io.BytesIO()
    img.save(buf, format="PNG")
    return PageInput(doc_id=doc, index=i, png=buf.getvalue(), width=64, height=64, image_size=(64, 64))


@dataclass
class _Comp:
    text: str
    finish_reason: str
    token_ids: list[int] = field(default_factory=lambda: [1, 2, 3])


@dataclass
class _Out:
    outputs: list[_Comp]
    prompt_token_ids: list[int] = field(default_factory=lambda: [0] * 10)


class FakeLLM:
    """Answers per page (keyed by the image's sha256) from a script of steps: ok, loop, cut, raise."""

    def __init__(self, script: dict[str, list[str]] | None = None, fail_batches: bool = False) -> None:
        self.script = script or {}
        self.calls: list[tuple[int, dict]] = []
        self.fail_batches = fail_batches

    def chat(self, convs, sampling_params=None, use_tqdm=False):
        self.calls.append((len(convs), sampling_params))
        if self.fail_batches and len(convs) > 1:
            raise RuntimeError("batch failed")
        outs = []
        for conv in convs:
            content = conv[0]["content"]
            assert content[0]["type"] == "image_url" and content[1]["type"] == "text"
            import base64

            data = base64.b64decode(content[0]["image_url"]["url"].split(",", 1)[1])
            sha = hashlib.sha256(data).hexdigest()
            steps = self.script.get(sha, [])
            step = steps.pop(0) if steps else "ok"
            if step == "raise":
                raise ValueError(f"bad image {sha[:8]}")
            if step == "loop":
                outs.append(_Out([_Comp("<p>" + "the same words again " * 200, "length")]))
            elif step == "cut":
                outs.append(_Out([_Comp('<div data-bbox="[1, 1, 9, 9]" data-label="Text"><p>half', "length")]))
            else:
                outs.append(_Out([_Comp(chandra_output(sha, 64, 64), "stop")]))
        return outs


def _sha(p: PageInput) -> str:
    return hashlib.sha256(p.png).hexdigest()


def _engine(llm: FakeLLM) -> VLLMEngine:
    return VLLMEngine("chandra-1", llm=llm, sampling_factory=lambda **kw: kw)


def test_vllm_one_call_per_batch_and_retries_only_the_bad_pages():
    pages = [_page(i) for i in range(5)]
    llm = FakeLLM({_sha(pages[1]): ["loop"], _sha(pages[3]): ["loop", "loop"], _sha(pages[4]): ["cut"]})
    res = asyncio.run(_engine(llm).ocr_batch(pages))
    prof = load_profile("chandra-1")
    # 5 pages in one call, then pages 1 and 3 again, then page 3 alone, with the retry sampling; page 4's
    # cut-off answer is kept, as chandra-ocr keeps it
    assert [n for n, _ in llm.calls] == [5, 2, 1]
    assert llm.calls[0][1]["temperature"] == prof.sampling.temperature
    assert llm.calls[1][1]["temperature"] == prof.retry_sampling.temperature
    assert all(r.ok for r in res)
    assert [r.attempts for r in res] == [1, 2, 1, 3, 1]
    assert res[0].raw == chandra_output(_sha(pages[0]), 64, 64)
    assert res[4].finish_reason == "length" and res[4].extra["problems"][0].startswith("the answer was cut off")
    assert res[0].prompt_tokens == 10 and res[0].completion_tokens == 3


def test_vllm_gives_up_after_max_retries():
    pages = [_page(0), _page(1)]
    prof = load_profile("chandra-1")
    llm = FakeLLM({_sha(pages[0]): ["loop"] * (prof.max_retries + 1)})
    res = asyncio.run(_engine(llm).ocr_batch(pages))
    assert res[1].ok and not res[0].ok
    assert res[0].attempts == prof.max_retries + 1 and res[0].finish_reason == "loop"
    assert "still looped after 6 retries" in res[0].error and res[0].extra["last_raw"]


def test_vllm_ignore_eos_asks_for_the_whole_budget_and_retries_nothing():
    """ignore_eos (benchmarks with weightless models), declared once for the engines that run Chandra
    (GenerationOptions): vLLM generates max_tokens for every page and a looping answer is not retried."""
    pages = [_page(0), _page(1)]
    llm = FakeLLM({_sha(pages[0]): ["loop"]})
    eng = VLLMEngine("chandra-1", llm=llm, sampling_factory=lambda **kw: kw, ignore_eos=True, max_tokens=64)
    res = asyncio.run(eng.ocr_batch(pages))
    assert [n for n, _ in llm.calls] == [2]
    assert llm.calls[0][1]["ignore_eos"] is True and llm.calls[0][1]["max_tokens"] == 64
    assert [r.attempts for r in res] == [1, 1] and res[0].raw.startswith("<p>the same words again")
    plain = FakeLLM()
    asyncio.run(_engine(plain).ocr_batch([_page(2)]))
    assert "ignore_eos" not in plain.calls[0][1]  # by default vLLM's own (stop at the end of the answer)


def test_vllm_a_failing_batch_is_split_so_a_bad_page_fails_alone():
    pages = [_page(i) for i in range(3)]
    llm = FakeLLM({_sha(pages[2]): ["raise"]}, fail_batches=True)
    res = asyncio.run(_engine(llm).ocr_batch(pages))
    assert [r.ok for r in res] == [True, True, False]
    assert "bad image" in res[2].error
    assert [n for n, _ in llm.calls] == [3, 1, 1, 1]


# ------------------------------------------------------------------------------ driver assembly


def _rows(name: str, n: int, indices: list[int], doc: int) -> list[dict]:
    from ocrserve.pipeline.ray_stages import make_row

    out = []
    for i in indices:
        page = Page(index=i, width=612, height=792, status="ok", engine="stub", attempts=1)
        out.append(
            make_row(
                kind="page",
                doc=doc,
                name=name,
                path=f"/in/{name}.pdf",
                abspath=f"/in/{name}.pdf",
                type="pdf",
                sha256="ab" * 32,
                page_count=n,
                n_pages=n,
                index=i,
                page_json=page.model_dump_json(),
            )
        )
    return out


class _FakeDataset:
    def __init__(self, rows):
        self.rows = rows

    def iter_rows(self):
        return iter(self.rows)


def _collect(rows, doc_names, out: Path):
    from ocrserve.pipeline.options import ConvertOptions
    from ocrserve.pipeline.ray import _collect as collect

    doc_rows = [{"doc": i, "name": n, "path": f"/in/{n}.pdf"} for i, n in enumerate(doc_names)]
    events = []
    summary = RunSummary()
    collect(
        _FakeDataset(rows),
        doc_rows,
        OutputTarget(out),
        "run1",
        "stub",
        "chandra-1",
        ConvertOptions().resolve(),
        lambda kind, **data: events.append(kind),
        summary,
        0,
    )
    return {r.name: r for r in summary.results}, events


def test_driver_keeps_a_page_once_and_reports_lost_pages(tmp_path):
    rows = _rows("a", 3, [0, 1, 1, 2], 0) + _rows("b", 3, [0, 2], 1)  # a: page 2 delivered twice; b: page 2 of 3 lost
    results, events = _collect(rows, ["a", "b", "c"], tmp_path)
    assert results["a"].status == "ok" and results["a"].pages == 3
    assert [p.index for p in results["a"].document.pages] == [0, 1, 2]
    assert results["b"].status == "failed" and "pages lost: 2 of 3" in results["b"].error
    assert results["c"].status == "failed" and "pages lost" in results["c"].error
    assert (tmp_path / "a" / "a.json").is_file()
    assert not (tmp_path / "b").exists()  # an incomplete document is never written
    assert events.count("page_done") == 5 and events.count("doc_done") == 3


# ------------------------------------------------------------------------------------- outputs


def test_complete_rule_is_the_same_for_a_folder_and_a_url(tmp_path):
    """Both schedulers decide with output.is_complete over OutputTarget.load_existing, whatever the target."""
    import fsspec

    from ocrserve.pipeline.output import is_complete

    ok = {"source": {"sha256": "x"}, "pages": [{"index": 0, "status": "ok"}, {"index": 1, "status": "fallback"}]}
    bad = {"source": {"sha256": "x"}, "pages": [{"index": 0, "status": "ok"}, {"index": 1, "status": "failed"}]}
    fs = fsspec.filesystem("memory")
    for name, data in (("good", ok), ("bad", bad)):
        (tmp_path / name).mkdir()
        (tmp_path / name / f"{name}.json").write_text(json.dumps(data))
        fs.pipe_file(f"/rule/out/{name}/{name}.json", json.dumps(data).encode())
    for target in (OutputTarget(tmp_path), OutputTarget("memory://rule/out")):
        assert is_complete(target.load_existing("good"), "x")
        assert is_complete(target.load_existing("good"), "x", [0, 1])
        assert not is_complete(target.load_existing("good"), "x", [0, 2])  # another page selection
        assert not is_complete(target.load_existing("good"), "y")  # a changed source
        assert not is_complete(target.load_existing("bad"), "x")  # a failed page
        assert target.load_existing("missing") is None and not is_complete(None, "x")


def test_fsspec_target_writes_json_last_and_replaces_old_output():
    import fsspec

    from ocrserve.document import Document, Source

    fs = fsspec.filesystem("memory")
    target = OutputTarget("memory://units/out")
    target.prepare()
    fs.pipe_file("/units/out/d/images/stale.png", b"old")
    doc = Document(
        source=Source(path="d.pdf", sha256="s", type="pdf", page_count=1), pages=[Page(index=0, width=10, height=10)]
    )
    where = target.write(doc, "d", {"images/d_p1_b0.png": b"png"}, "r1")
    assert where == "memory://units/out/d"
    assert sorted(fs.find("/units/out")) == [
        "/units/out/d/d.html",
        "/units/out/d/d.json",
        "/units/out/d/d.md",
        "/units/out/d/images/d_p1_b0.png",
    ]
    assert target.load_existing("d").sha256 == "s"
    with pytest.raises(ValueError):
        target.write(doc, "e", {"../escape.png": b"x"}, "r2")


# an output target as given -> as the driver names it
TARGETS = {
    "s3:/bucket/out": "s3://bucket/out",
    "s3://bucket/out": "s3://bucket/out",
    "file:/tmp/o": "file:///tmp/o",
    "/tmp/out": "/tmp/out",
    "out": "out",
    "memory:/x": "memory://x",
}


@pytest.mark.parametrize("given,expected", TARGETS.items())
def test_normalize_target(given, expected):
    assert normalize_target(given) == expected
    assert normalize_target(Path(expected)) == expected  # what a typer Path option makes of a URL


# ------------------------------------------------------------------------------ render isolation


def test_isolated_calls_survive_a_crashing_child_and_fail_alone():
    """A call that kills the child is retried once in a fresh child, then fails with the local
    pipeline's reason; the next call gets a new child and works; the child runs in another process."""
    import os

    from ocrserve.ingest.isolate import CRASH_MESSAGE, IsolatedCalls
    from ocrserve.ingest.pool import WorkerCrash

    calls = IsolatedCalls()
    try:
        first = calls.call(os.getpid)
        assert first != os.getpid() and calls.call(os.getpid) == first  # one child, kept between calls
        with pytest.raises(WorkerCrash, match="crashed on this document") as info:
            calls.call(os._exit, 1)
        assert str(info.value) == CRASH_MESSAGE
        assert calls.call(abs, -3) == 3 and calls.call(os.getpid) not in (first, os.getpid())
    finally:
        calls.close()


def test_isolated_child_exits_with_its_owner(tmp_path):
    """The render child does not outlive the (Ray worker) process that started it."""
    import subprocess
    import sys
    import time

    script = (
        "import os, sys\n"
        "from ocrserve.ingest.isolate import IsolatedCalls\n"
        "print(IsolatedCalls().call(os.getpid), flush=True)\n"
        "os._exit(0)\n"  # the owner dies without closing anything, as a killed worker does
    )
    log = tmp_path / "out.txt"
    with open(log, "w") as f:  # a file, not a pipe: a lingering child must not block the run
        out = subprocess.run(
            [sys.executable, "-c", script],
            stdout=f,
            stderr=subprocess.STDOUT,
            timeout=60,
            cwd=Path(__file__).resolve().parents[2],
        )
    assert out.returncode == 0, log.read_text()
    child = int(log.read_text().split()[0])

    def alive(pid: int) -> bool:
        try:
            with open(f"/proc/{pid}/stat") as f:
                return f.read().split(") ")[1][0] != "Z"
        except FileNotFoundError:
            return False

    deadline = time.monotonic() + 20
    while alive(child) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not alive(child), f"render child {child} outlived its owner"


def test_isolated_call_that_hangs_is_killed_and_fails_with_a_timeout():
    import os
    import time

    from ocrserve.ingest.isolate import IsolatedCalls
    from ocrserve.ingest.pool import WorkerTimeout

    calls = IsolatedCalls(timeout=None)
    try:
        child = calls.call(os.getpid)  # the child is up (its start is not part of the timeout here)
        with pytest.raises(TimeoutError, match="its own"):  # a task's own TimeoutError is just its error
            calls.call(_raise_timeout, "its own")
        assert calls.call(os.getpid) == child
        calls.timeout = 1.5
        t0 = time.monotonic()
        with pytest.raises(WorkerTimeout, match=r"timed out after 1.5 s \(twice\)"):
            calls.call(time.sleep, 3600)
        assert time.monotonic() - t0 < 30
        calls.timeout = None
        assert pid_gone(child, 10), "the stuck child is still running"
        assert calls.call(abs, -4) == 4  # a fresh child for the next call
    finally:
        calls.close()


def _raise_timeout(msg: str) -> None:
    raise TimeoutError(msg)
