"""The lite engine's per-page timeout: a page that hangs fails alone, its worker process is killed and
replaced, and later pages run normally.

The work runs in forked worker processes, so the hook is set before the engine forks them: `ocr_lines`
(what an image page runs) is replaced by a stand-in that leaves a marker file named after its process
and the page, and hangs on pages of a given width.
"""

from __future__ import annotations

import asyncio
import multiprocessing as mp
import os
import time
from pathlib import Path

import pytest
from PIL import Image

from ocrserve.engines.base import PageInput
from ocrserve.engines.lite import engine as lite
from ocrserve.engines.lite.engine import LiteEngine
from ocrserve.profiles import load_profile

PROFILE = load_profile("chandra-1")
TIMEOUT = 2.0
HANG, FINE = 37, 64  # page widths: a page 37 px wide hangs its worker


def _page(i: int, width: int) -> PageInput:
    img = Image.new("RGB", (width, 48), "white")
    return PageInput(doc_id="d", index=i, image=img, unit="px", source_type="png")


@pytest.fixture
def marks(tmp_path, monkeypatch) -> Path:
    def stand_in(image):
        (tmp_path / f"{os.getpid()}-{image.width}").touch()
        if image.width == HANG:
            time.sleep(120)
        return []

    monkeypatch.setattr(lite, "ocr_lines", stand_in)
    return tmp_path


def _pids(marks: Path, width: int) -> set[int]:
    return {int(p.name.split("-")[0]) for p in marks.iterdir() if p.name.endswith(f"-{width}")}


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


async def _until(check, within: float = 30.0) -> bool:
    deadline = time.monotonic() + within
    while not check():
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(0.05)
    return True


async def test_a_hanging_page_fails_alone_and_its_worker_is_replaced(marks):
    ours_before = {p.pid for p in mp.active_children()}
    engine = LiteEngine(PROFILE, workers=2, timeout=TIMEOUT, warm=False)
    try:
        # as many hangs as workers: both time out, and both workers are replaced
        hung = await asyncio.gather(*(engine.ocr(_page(i, HANG)) for i in range(2)))
        for r in hung:
            assert not r.ok and r.finish_reason == "error" and r.engine == "lite"
            assert f"timed out after {TIMEOUT:g} s" in r.error and "killed" in r.error
        # a hang among normal pages fails alone; the others run on the other worker
        mixed = await asyncio.gather(engine.ocr(_page(2, HANG)), *(engine.ocr(_page(i, FINE)) for i in range(3, 8)))
        assert not mixed[0].ok and "timed out" in mixed[0].error
        assert all(r.ok and r.error is None for r in mixed[1:]), [r.error for r in mixed[1:]]
        # afterwards the engine runs normally, with no more processes than workers
        after = await asyncio.gather(*(engine.ocr(_page(i, FINE)) for i in range(8, 12)))
        assert all(r.ok for r in after), [r.error for r in after]
        hung_pids = _pids(marks, HANG)
        assert len(hung_pids) == 3  # each hang had a worker of its own: a killed one is never reused
        assert not any(_alive(pid) for pid in hung_pids)
        assert not hung_pids & _pids(marks, FINE)
        assert len({p.pid for p in mp.active_children()} - ours_before) <= 2

        # a caller that gives up on a hanging page: that worker is killed too
        task = asyncio.ensure_future(engine.ocr(_page(20, HANG)))
        assert await _until(lambda: len(_pids(marks, HANG)) == 4)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        cancelled = _pids(marks, HANG) - hung_pids
        assert await _until(lambda: not any(_alive(pid) for pid in cancelled))
        assert (await engine.ocr(_page(21, FINE))).ok
    finally:
        await engine.aclose()
    workers = _pids(marks, FINE) | _pids(marks, HANG)
    assert await _until(lambda: not any(_alive(pid) for pid in workers))
    assert {p.pid for p in mp.active_children()} <= ours_before
