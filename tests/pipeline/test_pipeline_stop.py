"""Stopping a conversion: cancelling the Python API, Ctrl-C twice, a live run's staging folder kept, a document
that hangs the renderer failing alone (against the stand-in vLLM server where a model is needed)."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import ocrserve
from ocrserve.pipeline.local import Converter
from tests.support import helpers
from tests.support.pipeline_cli import ROOT


async def test_cancelling_the_python_api_raises_and_keeps_nothing_half_written(tmp_path, standin):
    import asyncio

    standin.control(delay_s=1.0)
    pdf = helpers.text_pdf(tmp_path / "slow.pdf", pages=4)
    with pytest.raises(asyncio.TimeoutError):
        await asyncio.wait_for(
            ocrserve.aconvert(pdf, output_dir=tmp_path / "o", server=standin.url, engine="openai"), 0.5
        )
    assert not list((tmp_path / "o").iterdir())  # no document, no staging folder


def test_a_running_conversion_keeps_its_staging_folder(tmp_path):
    """clean_stale_staging removes what dead runs left, never the folder of a live run."""
    from ocrserve.pipeline.output import clean_stale_staging, staging_dir

    out = tmp_path / "out"
    live = staging_dir(out, "doc", "abc")  # this process: alive
    live.mkdir(parents=True)
    dead = out / ".other.partial-def-999999999"
    dead.mkdir()
    clean_stale_staging(out)
    assert live.is_dir() and not dead.exists()


def _render_hanging_on_hang(path, *args, **kwargs):
    """render_page, except that it never returns for a file named hang* (a PDF pdfium loops on)."""
    from ocrserve.ingest.raster import render_page

    if Path(path).name.startswith("hang"):
        time.sleep(3600)
    return render_page(path, *args, **kwargs)


def test_a_document_that_hangs_the_renderer_fails_alone_with_a_timeout(tmp_path, monkeypatch):
    import ocrserve.pipeline.local as pipeline

    monkeypatch.setattr(pipeline, "render_page", _render_hanging_on_hang)  # forked workers see it too
    monkeypatch.setenv("OCRSERVE_RENDER_TIMEOUT_S", "1.5")
    d = tmp_path / "in"
    d.mkdir()
    helpers.text_pdf(d / "good.pdf", pages=2, title="Good")
    helpers.text_pdf(d / "hang.pdf", pages=1, title="Hang")
    helpers.text_pdf(d / "later.pdf", pages=1, title="Later")

    async def main():
        conv = Converter(engine="lite", output_dir=tmp_path / "out", render_workers=2)
        try:
            return await conv.run([str(d)])
        finally:
            await conv.aclose()

    import asyncio

    t0 = time.monotonic()
    summary = asyncio.run(main())
    assert time.monotonic() - t0 < 120
    by_name = {r.name: r for r in summary.results}
    assert by_name["good"].status == "ok" and by_name["later"].status == "ok"
    hang = by_name["hang"]
    assert hang.status != "ok"
    page = hang.document.pages[0] if hang.document else None
    reason = (page.error if page else None) or hang.error or ""
    assert "timed out after 1.5 s (twice)" in reason, (hang, page)
    assert "Good" in (tmp_path / "out" / "good" / "good.md").read_text()


@pytest.mark.parametrize("gap_s", [0.4, 0.05])
def test_a_second_ctrl_c_still_counts_and_cleans_up(tmp_path, standin, gap_s):
    """Two SIGINTs in a row (an impatient user): the summary still counts what is on disk, says what is
    left, and no staging folder stays behind; a second one that lands while the process exits (0.05 s:
    the stop is that quick) does not turn exit code 130 into death by SIGINT."""
    src = tmp_path / "in"
    src.mkdir()
    for i in range(7):
        helpers.text_pdf(src / f"d{i}.pdf", pages=2, title=f"Doc{i}")
    out = tmp_path / "out"
    standin.control(delay_s=0.5)
    proc = subprocess.Popen(
        [sys.executable, "-m", "ocrserve", "convert", str(src), "-o", str(out), "--server", standin.url, "-c", "3"],
        cwd=ROOT,
        stderr=subprocess.PIPE,
        text=True,
        stdout=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not any(
        p.name.startswith("d") for p in (out.iterdir() if out.is_dir() else [])
    ):
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    time.sleep(gap_s)  # a second Ctrl-C while the run stops, or while the process exits
    proc.send_signal(signal.SIGINT)
    err = proc.communicate(timeout=60)[1]
    assert proc.returncode == 130, err
    finished = sorted(p.name for p in out.iterdir() if not p.name.startswith("."))
    assert not [p for p in out.iterdir() if p.name.startswith(".")], list(out.iterdir())
    line = next(ln for ln in err.splitlines() if ln.startswith("interrupted: "))
    n = len(finished)
    assert line.startswith(f"interrupted: {n} finished ({n} ok), {7 - n} left; "), (line, finished)
    assert "Traceback" not in err, err
