"""Scoring a candidate folder: repeats, per-file and overall scores, CIs, missing pages, the CLI, --run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ocrserve.eval.bench import BenchError, candidate_files, load_bench, repeat_file_name
from ocrserve.eval.convert_run import RunStats
from ocrserve.eval.runner import bootstrap_ci, evaluate


def _pdf(path: Path, pages: int = 1) -> None:
    import pypdfium2 as pdfium

    path.parent.mkdir(parents=True, exist_ok=True)
    doc = pdfium.PdfDocument.new()
    for _ in range(pages):
        doc.new_page(200, 200)
    doc.save(str(path))
    doc.close()


def _jsonl(path: Path, rows: list[dict]) -> None:
    path.write_text("\n\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")  # blank lines are allowed


@pytest.fixture()
def bench_dir(tmp_path: Path) -> Path:
    root = tmp_path / "bench"
    _pdf(root / "pdfs" / "a.pdf", pages=2)
    _pdf(root / "pdfs" / "sub" / "b_pg3.pdf")
    _pdf(root / "pdfs" / "blank.pdf")
    _jsonl(
        root / "one.jsonl",
        [
            {"pdf": "a.pdf", "page": 1, "id": "a1", "type": "present", "text": "alpha"},
            {"pdf": "a.pdf", "page": 2, "id": "a2", "type": "present", "text": "beta"},
            {"pdf": "a.pdf", "page": 1, "id": "a3", "type": "order", "before": "alpha", "after": "gamma"},
            {"pdf": "sub/b_pg3.pdf", "page": 1, "id": "b1", "type": "absent", "text": "footer"},
        ],
    )
    _jsonl(
        root / "two.jsonl",
        [
            {"pdf": "blank.pdf", "page": 1, "id": "blank", "type": "baseline", "max_length": 5},
            {"pdf": "a.pdf", "page": 1, "id": "m1", "type": "math", "math": "x^{2}"},
        ],
    )
    return root


def _write(cand: Path, files: dict[str, str]) -> None:
    """Candidate files under `cand`: relative path -> text."""
    for rel, text in files.items():
        p = cand / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text, encoding="utf-8")


def _answers(cand: Path, answers: dict[tuple[str, int], list[str]]) -> Path:
    """A candidate folder: each (pdf, page)'s answers, one a repeat, in the files the runner names."""
    _write(
        cand, {repeat_file_name(pdf, page, r): t for (pdf, page), ts in answers.items() for r, t in enumerate(ts, 1)}
    )
    return cand


class NoBrowser:
    available = False
    reason = "no browser (test)"

    def render_many(self, formulas):
        raise AssertionError("must not render")

    def render(self, formula):
        raise AssertionError("must not render")


def test_load_bench_adds_default_baselines(bench_dir: Path):
    bench = load_bench(bench_dir)
    ids = [t.id for t in bench.tests]
    assert ids[:6] == ["a1", "a2", "a3", "b1", "blank", "m1"]
    # a.pdf and sub/b_pg3.pdf have no baseline test -> default ones in the "baseline" group
    assert set(ids[6:]) == {"a.pdf_baseline", "sub/b_pg3.pdf_baseline"}
    assert bench.group_of["a.pdf_baseline"] == "baseline"
    assert bench.groups == ["one.jsonl", "two.jsonl", "baseline"]
    assert load_bench(bench_dir, skip_baseline=True).tests[-1].id == "m1"


def test_bad_bench_input_names_file_and_line(bench_dir: Path):
    (bench_dir / "bad.jsonl").write_text('{"pdf": "a.pdf", "page": 1, "id": "x", "type": "order", "before": "a"}\n')
    with pytest.raises(BenchError, match=r"bad.jsonl:1: invalid test 'x'.*after"):
        load_bench(bench_dir)
    (bench_dir / "bad.jsonl").write_text("{not json\n")
    with pytest.raises(BenchError, match=r"bad.jsonl:1: not valid JSON"):
        load_bench(bench_dir)
    (bench_dir / "bad.jsonl").write_text(
        json.dumps({"pdf": "a.pdf", "page": 1, "id": "a1", "type": "present", "text": "z"})
    )
    with pytest.raises(BenchError, match="duplicate test id 'a1'"):
        load_bench(bench_dir)


def test_candidate_file_matching(tmp_path: Path):
    names = ["a_pg1_repeat1.md", "a_pg1_repeat2.md", "a_pg10_repeat1.md", "ab_pg1_repeat1.md"]
    names += ["sub/b_pg3_pg1_repeat1.md", "b_pg3_pg1_repeat1.md", "a_pg1_repeat1.txt"]
    _write(tmp_path, dict.fromkeys(names, ""))
    files = candidate_files(tmp_path, ["a.pdf", "sub/b_pg3.pdf"])
    assert [p.name for p in files[("a.pdf", 1)]] == ["a_pg1_repeat1.md", "a_pg1_repeat2.md"]
    assert [p.name for p in files[("a.pdf", 10)]] == ["a_pg10_repeat1.md"]
    assert [p.relative_to(tmp_path).as_posix() for p in files[("sub/b_pg3.pdf", 1)]] == ["sub/b_pg3_pg1_repeat1.md"]
    assert repeat_file_name("sub/b_pg3.pdf", 1, 2) == "sub/b_pg3_pg1_repeat2.md"


def test_scores_repeats_and_missing_pages(bench_dir: Path, tmp_path: Path):
    cand = _answers(
        tmp_path / "cand",
        {
            # a p1: three repeats; a1 passes in 2/3 (majority), a3 passes in 1/3
            ("a.pdf", 1): ["alpha then gamma", "alpha only", "nothing here"],
            # a p2 missing entirely; b: footer absent in one of two repeats -> 1/2 is not a majority
            ("sub/b_pg3.pdf", 1): ["body text", "body text footer"],
            ("blank.pdf", 1): [""],
        },
    )
    res = evaluate(load_bench(bench_dir), cand, renderer=NoBrowser(), n_bootstrap=200)
    by = {r.id: r for r in res.results}
    assert by["a1"].passed is True and by["a1"].score == pytest.approx(2 / 3)
    assert by["a3"].passed is False and by["a3"].score == pytest.approx(1 / 3)
    assert by["a2"].passed is False and by["a2"].missing
    assert by["b1"].passed is False and by["b1"].score == 0.5
    assert by["blank"].passed is True
    assert by["m1"].skipped and by["m1"].passed is None
    assert by["a.pdf_baseline"].passed is True  # 3/3 repeats have letters
    assert any("a.pdf page 2" in e for e in res.errors)
    groups = {g.name: g for g in res.groups}
    assert (groups["one.jsonl"].passed, groups["one.jsonl"].total) == (1, 4)
    assert (groups["two.jsonl"].passed, groups["two.jsonl"].total, groups["two.jsonl"].skipped) == (1, 1, 1)
    assert (groups["baseline"].passed, groups["baseline"].total) == (2, 2)
    assert res.overall == pytest.approx((0.25 + 1.0 + 1.0) / 3)
    assert not res.complete
    lo, hi = res.ci
    assert 0.0 <= lo <= res.overall <= hi <= 1.0
    # per-type rates average the repeat fractions
    assert res.by_type["present"] == (pytest.approx((2 / 3 + 0) / 2), 2)


def test_bootstrap_ci():
    assert bootstrap_ci([[1.0, 1.0], [1.0]]) == (1.0, 1.0)
    a = bootstrap_ci([[1, 0, 1, 0, 1, 1, 0, 1], [0, 0, 1, 1]], n_bootstrap=500, seed=3)
    b = bootstrap_ci([[1, 0, 1, 0, 1, 1, 0, 1], [0, 0, 1, 1]], n_bootstrap=500, seed=3)
    assert a == b and 0.0 < a[0] < (5 / 8 + 2 / 4) / 2 < a[1] < 1.0
    narrow = bootstrap_ci([[1, 0] * 200], n_bootstrap=500)
    wide = bootstrap_ci([[1, 0] * 5], n_bootstrap=500)
    assert narrow[1] - narrow[0] < wide[1] - wide[0]


def test_a_runs_record_in_the_report():
    stats = RunStats(pages_written=3, pages_kept=1, pages_failed=["a.pdf page 2"], wall_s=1.234)
    want = {"pages_written": 3, "pages_kept": 1, "pages_failed": ["a.pdf page 2"], "convert_wall_s": 1.23}
    assert stats.as_dict() == want and list(stats.as_dict()) == list(want)


def _cli():
    from ocrserve.cli import app

    return app


def test_cli_eval_writes_reports(bench_dir: Path, tmp_path: Path):
    answers = {
        ("a.pdf", 1): ["alpha gamma"],
        ("a.pdf", 2): ["beta"],
        ("sub/b_pg3.pdf", 1): ["text"],
        ("blank.pdf", 1): [""],
    }
    cand = _answers(tmp_path / "cand", answers)
    out_json, out_md = tmp_path / "r" / "e.json", tmp_path / "r" / "e.md"
    result = CliRunner().invoke(
        _cli(),
        [
            "eval",
            str(bench_dir),
            "--candidate",
            str(cand),
            "--json",
            str(out_json),
            "--report",
            str(out_md),
            "--no-math",
        ],
    )
    assert result.exit_code == 0, result.output
    assert "Overall: 100.0%" in result.output and "incomplete: 1 skipped" in result.output
    data = json.loads(out_json.read_text())
    assert data["files"]["one.jsonl"]["pass_rate"] == 1.0 and data["counts"]["skipped"] == 1
    assert {t["id"] for t in data["tests"]} >= {"a1", "m1", "a.pdf_baseline"}
    md = out_md.read_text()
    assert "Overall score: 100.0%" in md and "## Skipped tests (1)" in md and "`m1`" in md


def _words(text: str) -> str:
    """The CLI's error box wraps lines at the terminal width: compare words only."""
    import re

    return " ".join(re.sub(r"[│╭╮╰╯─]", " ", text).split())


def test_cli_eval_bad_input(bench_dir: Path, tmp_path: Path):
    result = CliRunner().invoke(_cli(), ["eval", str(tmp_path / "nope"), "--candidate", str(tmp_path)])
    assert result.exit_code != 0 and "not a folder" in _words(result.output)
    result = CliRunner().invoke(_cli(), ["eval", str(bench_dir), "--candidate", str(tmp_path / "missing")])
    assert result.exit_code != 0 and "not a folder" in _words(result.output)


def test_cli_run_converts_then_scores(bench_dir: Path, tmp_path: Path, monkeypatch):
    import ocrserve
    from ocrserve.document import Block, Document, Page, Source
    from ocrserve.pipeline.results import ConversionResult

    calls = []

    def fake_convert(paths, *, pages=None, **options):
        calls.append((sorted(Path(p).name for p in paths), pages, options))
        docs = []
        for p in paths:
            want = [int(x) for x in pages.split(",")]
            body = {1: "alpha gamma", 2: "beta"} if Path(p).name == "a.pdf" else {1: "text"}
            if Path(p).name == "blank.pdf":
                body = {1: ""}
            pgs = [
                Page(
                    index=n - 1,
                    width=200,
                    height=200,
                    blocks=[
                        Block(
                            index=0,
                            label="Page-Header",
                            bbox=[0, 0, 1, 1],
                            bbox_norm=[0, 0, 1, 1],
                            html="",
                            markdown="footer",
                        ),
                        Block(
                            index=1, label="Text", bbox=[0, 0, 1, 1], bbox_norm=[0, 0, 1, 1], html="", markdown=body[n]
                        ),
                    ],
                )
                for n in want
            ]
            doc = Document(source=Source(path=str(p), type="pdf", page_count=2), pages=pgs)
            docs.append(ConversionResult(name=Path(p).stem, path=str(p), status="ok", document=doc))
        return docs  # ocrserve.convert's results: one per document

    monkeypatch.setattr(ocrserve, "convert", fake_convert)
    cand = tmp_path / "lite"
    args = [
        "eval",
        str(bench_dir),
        "--candidate",
        str(cand),
        "--run",
        "--engine",
        "lite",
        "--no-math",
        "--json",
        str(tmp_path / "e.json"),
    ]
    result = CliRunner().invoke(_cli(), args)
    assert result.exit_code == 0, result.output
    assert (cand / "a_pg2_repeat1.md").read_text().strip() == "beta"
    assert (cand / "sub" / "b_pg3_pg1_repeat1.md").read_text().strip() == "text"  # header block dropped
    assert sorted(c[1] for c in calls) == ["1", "1,2"]
    assert all(c[2]["engine"] == "lite" for c in calls)
    data = json.loads((tmp_path / "e.json").read_text())
    assert data["overall"]["score"] == 1.0 and data["run"]["pages_written"] == 4
    # a second run keeps the files
    calls.clear()
    assert CliRunner().invoke(_cli(), args).exit_code == 0 and calls == []
