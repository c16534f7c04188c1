"""What the Ray conversion tests share: the test engines (imported by the Ray workers: PYTHONPATH is set to
the repository root for them), the module's local Ray instance with a renderer crash hook, running the
local pipeline and the Ray one, and comparing their output folders."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
from pathlib import Path

import pytest
import ray

from ocrserve.engines import Engine, EngineResult, PageInput
from ocrserve.pipeline.local import Converter
from ocrserve.profiles import load_profile
from ocrserve.settings import Settings
from tests.fakes.standin import chandra_output

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
