"""One pipeline, two schedulers: a sequence of runs with every option that changes the output leaves the same
files locally and on a local Ray instance (engines and helpers: tests.support.ray_convert)."""

from __future__ import annotations

import json

from ocrserve.profiles import load_profile
from tests.support.helpers import image, text_pdf
from tests.support.ray_convert import GiveUpEngine, assert_same_outputs, run_local, run_ray, tree
from tests.support.ray_convert import crash_marker as crash_marker
from tests.support.ray_convert import ray_local as ray_local


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
