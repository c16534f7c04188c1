"""Memory over long runs (#29.14): what `ocrserve convert` keeps per finished document, measured with
tracemalloc (bytes, not time) at the end of two runs of the CLI's own scheduler call, one of a few
documents and one of many, with the lite engine and with a model server answering full-length pages
(the stand-in, as long an answer as max_tokens allows). It kept each Document (17 KB a one-page
document with lite, 0.8 MB a page with full-length answers) until the run ended, then each finished
document's DocResult and bookkeeping (about 3 KB); now a run keeps counts, and names only the documents
it lists at the end (failed, from the fallback, unsupported: the first RunSummary NAMED of each), so a
finished document leaves nothing behind but what the interpreter's own caches take while they fill (a
few hundred bytes a document over a short run, less and less over a longer one:
bench/results/client-memory-lite-cpu)."""

from __future__ import annotations

import gc
import tracemalloc

from ocrserve.cli.convert import _run
from ocrserve.pipeline.options import ConvertOptions
from tests.cli.support import cli
from tests.support.helpers import text_pdf


def _retained(files, out, **options) -> int:
    """Bytes still allocated when the run is done (its run_done event), over those before it."""
    seen: dict[str, int] = {}

    def display(kind: str, data: dict) -> None:
        if kind == "run_done":
            gc.collect()
            seen["end"] = tracemalloc.get_traced_memory()[0]

    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        summary = _run([str(f) for f in files], ConvertOptions(output=str(out), render_workers=1, **options), display)
    finally:
        tracemalloc.stop()
    assert summary.counts() == {"ok": len(files)}, summary.failed
    return seen["end"] - before


def _per_document(tmp_path, files, few: int, warm: int = 2, **options) -> float:
    """Growth per document from `few` to all `files`, after a run of the first `warm` (one-time caches:
    imports, fonts, pools, the interpreter's small strings and regex caches, are no growth)."""
    _retained(files[:warm], tmp_path / "warm", **options)
    small = _retained(files[:few], tmp_path / "few", **options)
    large = _retained(files, tmp_path / "many", **options)
    per_doc = (large - small) / (len(files) - few)
    print(f"retained per finished document: {per_doc:.0f} bytes ({options})")  # shown with -s (bench/results)
    return per_doc


def test_a_finished_document_leaves_nothing_behind(tmp_path):
    src = tmp_path / "in"
    src.mkdir()
    body = "lorem ipsum dolor sit amet " * 12
    files = [text_pdf(src / f"d{i:03d}.pdf", pages=1, title=f"Doc {i} {body}") for i in range(36)]
    per_doc = _per_document(tmp_path, files, 6, engine="lite")
    assert per_doc < 1000, f"{per_doc:.0f} bytes kept per finished document"  # 3135-3209 before, 16071 at first


def test_full_length_answers_leave_nothing_behind(tmp_path, standin):
    """The issue's 0.8 MB a page: every page answered at full length (32,000 characters, 8,000 tokens)."""
    standin.reset(default_plan=["huge"] * 3, huge_chars=32_000)  # each run asks for a page again
    src = tmp_path / "in"
    src.mkdir()
    files = [text_pdf(src / f"d{i:03d}.pdf", pages=1, title=f"Doc {i}") for i in range(33)]
    # warmed with the same answers; one page in flight: the client's pooled connections (bounded) do not vary
    per_doc = _per_document(tmp_path, files, 3, warm=len(files), server=standin.url, concurrency=1)
    assert standin.stats()["generation_tokens_total"] == 8_000 * (33 + 3 + 33)  # every page at full length
    assert per_doc < 2000, f"{per_doc:.0f} bytes kept per finished one-page document"  # 3367-4812 before


def test_a_long_run_names_only_the_first_documents_it_lists(tmp_path):
    """The CLI's summary keeps counts and the first NAMED failed documents (NAMED made 2 here): the
    others are counted and said to be left unnamed; the exit code still says some failed."""
    src = tmp_path / "in"
    src.mkdir()
    for i in range(5):
        (src / f"broken{i}.pdf").write_bytes(b"%PDF-1.7\nnot a pdf")
    text_pdf(src / "good.pdf", pages=1)
    shim = "import ocrserve.pipeline.results as r; r.NAMED = 2"
    r = cli("convert", str(src), "-o", str(tmp_path / "out"), "--engine", "lite", shim=shim)
    assert r.returncode == 1, r.stderr
    assert "6 documents: 5 failed, 1 ok;" in r.stderr
    listed = r.stderr[r.stderr.index("5 documents failed:") :].splitlines()[1:]
    assert [line.split(":")[0].strip() for line in listed] == [str(src / "broken0.pdf"), str(src / "broken1.pdf")] + [
        "... and 3 more (--json-log names every document)"
    ]
