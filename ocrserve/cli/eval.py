"""`ocrserve eval`: olmOCR-Bench compatible scoring of Markdown outputs (optionally converting first)."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

import typer


def register(app: typer.Typer) -> None:
    @app.command("eval")
    def eval_cmd(
        bench_dir: Path = typer.Argument(..., help="olmOCR-Bench folder: *.jsonl test files and pdfs/"),
        candidate: Path = typer.Option(
            None, "--candidate", "-c", help="folder of <pdf>_pg<N>_repeat<R>.md files (written by --run)"
        ),
        json_out: Path = typer.Option(None, "--json", help="write the full results (every test and repeat) as JSON"),
        report: Path = typer.Option(None, "--report", help="write a Markdown report (scores and failed tests)"),
        run: bool = typer.Option(False, "--run", help="convert the benchmark PDFs into --candidate first"),
        engine: str = typer.Option(None, "--engine", help="--run: engine (lite, openai, hf)"),
        server: str = typer.Option(None, "--server", help="--run: OpenAI-compatible server URL"),
        model: str = typer.Option(
            None,
            "--model",
            help="--run: model profile, chandra-2, chandra-1 or a profile file "
            "(default: what the server serves, else chandra-2)",
        ),
        repeats: int = typer.Option(1, "--repeats", min=1, help="--run: conversions per page"),
        force: bool = typer.Option(False, "--force", help="--run: convert again even when files exist"),
        bootstrap_samples: int = typer.Option(1000, "--bootstrap-samples", min=0),
        confidence: float = typer.Option(0.95, "--confidence", min=0.5, max=0.999),
        seed: int = typer.Option(0, "--seed", help="bootstrap random seed"),
        browser: str = typer.Option(
            None, "--browser", help="Chromium executable for math tests (default: found on PATH)"
        ),
        no_math: bool = typer.Option(False, "--no-math", help="skip math tests (reported as skipped)"),
        skip_baseline: bool = typer.Option(False, "--skip-baseline", help="leave out the baseline tests"),
        show_failures: int = typer.Option(10, "--show-failures", help="failed tests to print"),
    ) -> None:
        """Score Markdown outputs with olmOCR-Bench's tests (present, absent, order, table, math, baseline)."""
        from ocrserve.cli.extras import require

        require("eval", "ocrserve eval")
        from ocrserve.eval.bench import BenchError, load_bench
        from ocrserve.eval.mathrender import ChromiumKatex
        from ocrserve.eval.report import summary_lines, to_json, to_markdown
        from ocrserve.eval.runner import evaluate

        command = "ocrserve " + " ".join(shlex.quote(a) for a in sys.argv[1:])
        try:
            bench = load_bench(bench_dir, skip_baseline=skip_baseline)
        except BenchError as e:
            raise typer.BadParameter(str(e), param_hint="BENCH_DIR") from None
        if candidate is None:
            raise typer.BadParameter("--candidate DIR is required (the folder to score, or to write with --run)")
        extra = None
        if run:
            from ocrserve.eval.convert_run import run_conversion

            opts = {"model": model} if model else {}
            if engine:
                opts["engine"] = engine
            if server:
                opts["server"] = server
            typer.echo(f"Converting {len(bench.tested_pages())} PDFs into {candidate} ...", err=True)
            stats = run_conversion(bench, candidate, repeats=repeats, force=force, convert_options=opts)
            extra = {
                "engine": engine or "default",
                "model": model or "default",
                "server": server,
                "repeats": repeats,
                **stats.as_dict(),
            }
            typer.echo(
                f"  {stats.pages_written} pages written, {stats.pages_kept} kept, "
                f"{len(stats.pages_failed)} failed, {stats.wall_s:.1f}s converting",
                err=True,
            )
        elif not candidate.is_dir():
            raise typer.BadParameter(f"{candidate}: not a folder", param_hint="--candidate")
        renderer = None if no_math else ChromiumKatex(browser)
        res = evaluate(
            bench, candidate, renderer=renderer, n_bootstrap=bootstrap_samples, ci_level=confidence, seed=seed
        )
        for line in summary_lines(res):
            typer.echo(line)
        for r in res.failed[: max(0, show_failures)]:
            bad = next((x for x in r.repeats if x.passed is False), None)
            typer.echo(f"  [FAIL] {r.id} ({r.type}, {r.pdf} p{r.page}): {bad.explanation if bad else ''}")
        for error in res.errors[:10]:
            typer.echo(f"  [ERROR] {error}")
        if json_out:
            json_out.parent.mkdir(parents=True, exist_ok=True)
            json_out.write_text(
                json.dumps(to_json(res, command=command, extra=extra), indent=2, ensure_ascii=False) + "\n",
                encoding="utf-8",
            )
        if report:
            report.parent.mkdir(parents=True, exist_ok=True)
            report.write_text(to_markdown(res, command=command, extra=extra), encoding="utf-8")
