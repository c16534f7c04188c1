"""#29.2: which pages a rerun converts again (output.plan_document, the one rule of both schedulers): with
the model that wrote the output, only the pages that came from the fallback or failed; the whole
document when another model wrote it, for another selection, with --force, or with no model."""

from __future__ import annotations

from pathlib import Path

from ocrserve.ingest.sources import SourceFile
from ocrserve.pipeline.output import Existing, plan_document

SRC = SourceFile(path=Path("/in/report.pdf"), name="report")


def _plan(existing: Existing, indices=(0, 1, 2, 3), model: str | None = "chandra-1", **kw):
    return plan_document(
        SRC,
        "abc",
        4,
        list(indices),
        writes=True,
        force=kw.pop("force", False),
        here=existing,
        alt=lambda: None,
        redo_fallback=model is not None,
        model=model,
        **kw,
    )


def _existing(fallback=(), failed=(), model="chandra-1", pages=(0, 1, 2, 3)) -> Existing:
    return Existing(
        sha256="abc",
        path="/in/report.pdf",
        pages=frozenset(pages),
        ok=not failed,
        page_count=4,
        formats=frozenset({"md", "html", "json"}),
        fallback=frozenset(fallback),
        failed=frozenset(failed),
        model=model,
    )


def test_only_the_fallback_s_and_the_failed_pages_are_converted_again():
    plan = _plan(_existing(fallback={1, 3}))
    assert plan.status is None and plan.keep == {0, 2}
    assert plan.redo == "2 of 4 pages came from the fallback: only those converted again"
    plan = _plan(_existing(fallback={1}, failed={2}))
    assert (
        plan.keep == {0, 3} and plan.redo == "1 of 4 pages came from the fallback, 1 failed: only those converted again"
    )
    plan = _plan(_existing(failed={2}))
    assert plan.keep == {0, 1, 3} and plan.redo == "1 of 4 pages failed: only those converted again"
    plan = _plan(_existing(fallback={0, 1, 2, 3}))  # every page from the fallback: all of them, and no more
    assert plan.keep == set() and plan.redo == "4 of 4 pages came from the fallback: only those converted again"


def test_the_whole_document_otherwise():
    # another model wrote it: its pages are not this run's model's
    plan = _plan(_existing(fallback={1}, model="chandra-2"))
    assert plan.keep == set() and plan.redo == "1 of 4 pages came from the fallback: converted again"
    # a wider selection than the output holds
    plan = _plan(_existing(fallback={1}, pages=(0, 1)))
    assert plan.keep == set()
    # --force
    assert _plan(_existing(fallback={1}), force=True).keep == set()
    # a run with no model (lite) keeps its fallback pages as they are, and redoes a failed one whole
    assert _plan(_existing(fallback={1}), model=None).status == "skipped"
    plan = _plan(_existing(failed={2}, model="lite"), model=None)
    assert plan.status is None and plan.keep == set() and plan.redo is None
    # done: nothing from the fallback, nothing failed
    assert _plan(_existing()).status == "skipped"
