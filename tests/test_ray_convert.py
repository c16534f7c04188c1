"""`ocrserve convert --ray` on a local Ray instance: same files as the local pipeline, killed workers'
pages redone, nothing lost, resumable, fsspec output.

One Ray instance (2 CPUs) for the module. Engines used: a stub engine (deterministic Chandra answer
from the page image, see tests.standin.chandra_output), the `lite` engine, and the `openai` engine
against the stand-in vLLM server. The engine classes below are imported by the Ray workers
(PYTHONPATH is set to the repository root for them).
"""

from __future__ import annotations

import asyncio
import hashlib
import io
import json
import os
from pathlib import Path

import pytest

ray = pytest.importorskip("ray", reason="the ray extra is needed: pip install 'ocrserve[ray]'")

from ocrserve.engines import EngineResult, PageInput  # noqa: E402
from ocrserve.pipeline import Converter  # noqa: E402
from ocrserve.profiles import load_profile  # noqa: E402
from ocrserve.settings import Settings  # noqa: E402

from tests.helpers import image, text_pdf  # noqa: E402
from tests.standin import chandra_output  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


# ------------------------------------------------------------------------------ test engines


class StubEngine:
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
        return EngineResult(raw=raw, ok=True, engine=self.name, finish_reason="stop",
                            prompt_tokens=100 + page.index, completion_tokens=len(raw) // 4)

    async def aclose(self) -> None:
        pass


class KillingEngine(StubEngine):
    """Kills its own process (os._exit) the first time it sees a chosen page, tracked by a marker file."""

    async def ocr(self, page: PageInput, *, on_delta=None) -> EngineResult:
        if page.index in self.options["kill_pages"]:
            marker = Path(self.options["marker_dir"]) / f"{page.doc_id.replace('/', '_')}-{page.index}"
            if not marker.exists():
                marker.write_text(str(os.getpid()))
                os._exit(1)  # the actor dies mid-batch, as a crashed worker or a lost node would
        return await super().ocr(page)


# ---------------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def ray_local():
    if ray.is_initialized():
        ray.shutdown()
    env = {"PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""), "RAY_DEDUP_LOGS": "0"}
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False,
             runtime_env={"env_vars": env}, object_store_memory=200 * 1024 * 1024)
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
    from ocrserve.distributed import run_ray_convert

    kw.setdefault("ray_progress", False)
    return run_ray_convert(inputs, output=out, engine=engine, settings=_settings(), **kw)


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


def test_same_files_as_local_pipeline_stub_engine(ray_local, docs, tmp_path):
    profile = load_profile("chandra-1")
    local = run_local([docs], tmp_path / "local", StubEngine(profile))
    dist = run_ray([docs], tmp_path / "ray", StubEngine)
    assert dist.counts() == local.counts() == {"ok": 5, "failed": 1}
    assert dist.pages == local.pages == 3 + 2 + 1 + 1 + 1
    broken = [r for r in dist.results if r.status == "failed"]
    assert [r.name for r in broken] == ["broken"] and "PDF" in broken[0].error
    assert [r.name for r in dist.results] == [r.name for r in local.results]
    assert_same_outputs(tree(tmp_path / "local"), tree(tmp_path / "ray"))
    assert (tmp_path / "ray" / "sub" / "letter" / "letter.md").is_file()
