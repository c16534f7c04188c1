"""One process pool a convert run (#27.6): with the lite engine, page rendering and lite's pages run in the
same worker processes (the run's pool, made once), not in a pool beside the render pool."""

from __future__ import annotations

import asyncio
import os
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from ocrserve.engines.lite import engine as lite
from ocrserve.ingest import raster
from ocrserve.pipeline.local import Converter
from tests.support import helpers

PAGE_RAW, RENDER_PAGE = lite.page_raw, raster.render_page


def _mark(kind: str) -> None:
    (Path(os.environ["TEST_POOL_PIDS"]) / f"{kind}-{os.getpid()}").touch()


def _lite_page(task):
    _mark("lite")
    return PAGE_RAW(task)


def _rendered(*args, **kwargs):
    _mark("render")
    return RENDER_PAGE(*args, **kwargs)


def test_a_lite_run_renders_and_reads_its_pages_in_one_pool(tmp_path, monkeypatch):
    pools: list[ProcessPoolExecutor] = []
    made = ProcessPoolExecutor.__init__

    def counted(self, *args, **kwargs):
        pools.append(self)
        made(self, *args, **kwargs)

    monkeypatch.setattr(ProcessPoolExecutor, "__init__", counted)
    pids = tmp_path / "pids"
    pids.mkdir()
    monkeypatch.setenv("TEST_POOL_PIDS", str(pids))  # read by the workers (forked: module-level hooks)
    monkeypatch.setattr(lite, "page_raw", _lite_page)
    monkeypatch.setattr("ocrserve.pipeline.local.render_page", _rendered)
    (tmp_path / "in").mkdir()
    src = helpers.text_pdf(tmp_path / "in" / "a.pdf", pages=4)
    helpers.text_pdf(tmp_path / "in" / "b.pdf", pages=2)

    async def convert():
        opts = {"output": tmp_path / "out", "formats": "md", "render_workers": 2, "engine_options": {"workers": 2}}
        async with Converter(engine="lite", **opts) as conv:
            return await conv.run(src.parent)

    summary = asyncio.run(convert())
    assert [r.status for r in summary.results] == ["ok", "ok"], [r.error for r in summary.results]
    assert len(pools) == 1, f"{len(pools)} process pools in one run"
    lite_pids = {p.name.split("-")[1] for p in pids.glob("lite-*")}
    render_pids = {p.name.split("-")[1] for p in pids.glob("render-*")}
    assert lite_pids and lite_pids <= render_pids, (lite_pids, render_pids)
