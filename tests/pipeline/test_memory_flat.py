"""Memory over long runs (#29.14): what `ocrserve convert` keeps per finished document, measured with
tracemalloc (bytes, not time) at the end of two runs of the CLI's own scheduler call with the lite
engine, one of a few documents and one of many. It kept each Document (its pages' text and blocks: 17
KB a one-page document, 0.8 MB a page with full-length answers) until the run ended; a finished
document now leaves only its small DocResult (about 3 KB with its bookkeeping; 16 KB before)."""

from __future__ import annotations

import gc
import tracemalloc

from ocrserve.cli.convert import _run
from ocrserve.pipeline.options import ConvertOptions
from tests.support.helpers import text_pdf


def _retained(files, out) -> int:
    """Bytes still allocated when the run is done (its run_done event), over those before it."""
    seen: dict[str, int] = {}

    def display(kind: str, data: dict) -> None:
        if kind == "run_done":
            gc.collect()
            seen["end"] = tracemalloc.get_traced_memory()[0]

    options = ConvertOptions(output=str(out), engine="lite", render_workers=1)
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        summary = _run([str(f) for f in files], options, display)
    finally:
        tracemalloc.stop()
    assert summary.counts() == {"ok": len(files)}, summary.results
    return seen["end"] - before


def test_a_finished_document_leaves_little_behind(tmp_path):
    src = tmp_path / "in"
    src.mkdir()
    body = "lorem ipsum dolor sit amet " * 12
    files = [text_pdf(src / f"d{i:03d}.pdf", pages=1, title=f"Doc {i} {body}") for i in range(36)]
    _retained(files[:3], tmp_path / "warm")  # one-time caches (imports, fonts, pools) are no growth
    few = _retained(files[:6], tmp_path / "few")
    many = _retained(files, tmp_path / "many")
    per_doc = (many - few) / (len(files) - 6)
    assert per_doc < 6000, f"{per_doc:.0f} bytes kept per finished document"
