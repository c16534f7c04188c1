"""`ocrserve bench`: ocrserve's pipeline beside a plain client and the engine's ceiling, on one server;
`ocrserve bench sweep`: `ocrserve serve` in each configuration of a spec, measured the same way (GPU)."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path
from typing import Any

import typer
from typer.core import TyperGroup


class _RunByDefault(TyperGroup):
    """`ocrserve bench ARGS` is `ocrserve bench run ARGS` unless ARGS start with a subcommand (`sweep`);
    `ocrserve bench --help` is the run's help, which names the sweep."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        if not args or args[0] not in self.commands:
            args = ["run", *args]
        return super().parse_args(ctx, args)


def register(app: typer.Typer) -> None:
    group = typer.Typer(
        cls=_RunByDefault,
        add_completion=False,
        help="Benchmark a server: ocrserve's pipeline, a plain client, the engine's ceiling; "
        "`ocrserve bench sweep`: serving configurations.",
    )
    app.add_typer(group, name="bench")

    @group.command("run")
    def bench(
        ctx: typer.Context,
        corpus: str | None = typer.Argument(None, help="folder or PDF file of pages (or use --synthetic N)"),
        server: str = typer.Option(..., "--server", help="OpenAI-compatible server URL (vLLM)"),
        synthetic: int | None = typer.Option(
            None, "--synthetic", help="N distinct generated pages instead of a corpus"
        ),
        modes: str = typer.Option(
            "pipeline,plain,ceiling,stages",
            "--modes",
            help="comma-separated: pipeline, plain, ceiling, stages (client CPU per stage)",
        ),
        model: str | None = typer.Option(
            None,
            "--model",
            "-m",
            help="model profile: chandra-2, chandra-1 or a profile "
            "file (default: what the server serves, else chandra-2)",
        ),
        concurrency: int = typer.Option(128, "--concurrency", "-c", help="requests in flight (pipeline and ceiling)"),
        plain_batch: int = typer.Option(
            28, "--plain-batch", help="the plain client's batch (Chandra CLI: 28; 1 = sequential)"
        ),
        max_tokens: int = typer.Option(1024, "--max-tokens", help="output tokens per page"),
        ignore_eos: bool = typer.Option(
            True, "--ignore-eos/--no-ignore-eos", help="fix the output length (weightless models)"
        ),
        api_key: str | None = typer.Option(
            None, "--api-key", help="API key for the server (default: OCRSERVE_API_KEY)"
        ),
        stream_probe: int = typer.Option(
            5, "--stream-probe", help="pages streamed one by one on the idle server (0 = skip)"
        ),
        gpu_peak_tflops: float | None = typer.Option(None, "--gpu-peak-tflops", help="GPU bf16 dense peak for MFU"),
        seed: int = typer.Option(0, "--seed", help="synthetic corpus seed"),
        stage_pages: int = typer.Option(
            40, "--stage-pages", min=1, help="pages of the client CPU split (stages mode), one at a time"
        ),
        plain_pages: int | None = typer.Option(
            None,
            "--plain-pages",
            min=1,
            help="the plain mode sends only the corpus's first N pages (it is the slow one)",
        ),
        out: Path = typer.Option(Path("bench/results"), "--out", help="folder for the JSON and Markdown report"),
        name: str | None = typer.Option(None, "--name", help="report name (default: bench-<timestamp>)"),
    ) -> None:
        """Measure pages/s, latency, time to first block, client CPU and GPU memory against a live server
        (`ocrserve bench` with no subcommand runs this; `ocrserve bench sweep --help`: the serving sweep)."""
        import time

        from ocrserve.bench.runner import run_bench, write_report
        from ocrserve.settings import get_settings

        mode_list = [m.strip() for m in modes.split(",") if m.strip()]
        name = name or time.strftime("bench-%Y%m%d-%H%M%S")
        command = "ocrserve " + " ".join(shlex.quote(a) for a in sys.argv[1:])
        try:
            # the options go to run_bench by name (server, corpus, concurrency, ...); these are decided here
            decided = {
                "modes": mode_list,
                "api_key": api_key or get_settings().api_key,
                "command": command,
                "on_partial": lambda rep: write_report(rep, out, name),
            }
            given = {k: v for k, v in ctx.params.items() if k not in ("out", "name")}
            report = run_bench(**(given | decided))
        except ValueError as e:
            typer.echo(f"error: {e}", err=True)
            raise typer.Exit(2) from None
        jp, mp = write_report(report, out, name)
        typer.echo(mp.read_text())
        typer.echo(f"written: {jp} {mp}", err=True)

    @group.command("sweep")
    def sweep(
        spec: Path | None = typer.Option(
            None, "--spec", help="sweep spec (JSON, bench/sweeps/); with --scaling, its first config is the base"
        ),
        scaling: int | None = typer.Option(
            None, "--scaling", min=1, help="compare dp replicas 1..N and the encoder/decoder split on N GPUs"
        ),
        only: str | None = typer.Option(
            None, "--only", help="comma-separated config names to run (in the spec's order)"
        ),
        model: str | None = typer.Option(
            None,
            "--model",
            envvar="CHANDRA1_SHAPE",
            help="model folder (default: $CHANDRA1_SHAPE, else each config's profile)",
        ),
        out: Path = typer.Option(Path("bench-out"), "--out", envvar="OUT", help="folder for NAME.json and NAME.md"),
        name: str = typer.Option("sweep", "--name", help="report name"),
        work: Path | None = typer.Option(
            None, "--work", help="logs and assembled model folders (default: a temp folder)"
        ),
        overlap: int = typer.Option(
            1, "--overlap", min=1, help="servers alive at once (the next starts while one is measured)"
        ),
        pages: int | None = typer.Option(None, "--pages", min=1, help="override the spec's page count"),
        max_tokens: int | None = typer.Option(None, "--max-tokens", min=1, help="override the spec's output length"),
        port: int = typer.Option(8100, "--port", help="first server's port"),
        gpu_memory_gib: float | None = typer.Option(
            None, "--gpu-memory-gib", help="plan for this much GPU memory (no nvidia-smi needed)"
        ),
        vllm_bin: str | None = typer.Option(
            None, "--vllm-bin", help="vllm executable for ocrserve serve (tests: a stand-in)"
        ),
        startup_timeout: float = typer.Option(600, "--startup-timeout", help="seconds a server may take to start"),
        deadline_s: float | None = typer.Option(
            None, "--deadline-s", help="start no configuration later than this many seconds minus --config-budget-s"
        ),
        config_budget_s: float = typer.Option(
            150, "--config-budget-s", help="seconds one configuration is expected to take"
        ),
        dry_run: bool = typer.Option(
            False, "--dry-run", help="plan every configuration, print the commands, start nothing"
        ),
    ) -> None:
        """Start `ocrserve serve` in each configuration of a spec in turn and measure each with the same distinct
        pages at a fixed output length (pages/s, p50/p95, peak GPU memory, vision+prefill alone, vLLM's stage
        times); writes OUT/NAME.json (everything, with each server's log tails) and OUT/NAME.md (the table and
        the exact commands). Exit 1 when a configuration failed."""
        import logging
        import tempfile

        from ocrserve.bench.sweep import Sweep
        from ocrserve.bench.sweep_report import table_rows
        from ocrserve.bench.sweep_spec import sweep_spec

        try:
            the_spec = sweep_spec(spec, scaling=scaling, only=only, pages=pages, max_tokens=max_tokens)
        except ValueError as e:
            typer.echo(f"error: {e}", err=True)
            raise typer.Exit(2) from None
        if logging.getLogger().getEffectiveLevel() > logging.INFO:  # progress: each server started, measured
            logging.getLogger("ocrserve.bench").setLevel(logging.INFO)
        work = work or Path(tempfile.mkdtemp(prefix="ocrserve-sweep-"))
        work.mkdir(parents=True, exist_ok=True)
        runner = Sweep(
            the_spec,
            out,
            model=model,
            work=work,
            port=port,
            overlap=overlap,
            gpu_memory_gib=gpu_memory_gib,
            vllm_bin=vllm_bin,
            startup_timeout=startup_timeout,
            deadline_s=deadline_s,
            config_budget_s=config_budget_s,
            name=name,
            command="ocrserve " + shlex.join(sys.argv[1:]),
        )
        report = runner.dry_run() if dry_run else runner.run()
        for row in table_rows(report):
            typer.echo(str({k: v for k, v in row.items() if v not in (None, "")}))
        if dry_run:
            for cfg_name, r in report["results"].items():
                for c in r["plan"].get("commands") or []:
                    typer.echo(f"[{cfg_name}] {c}")
        typer.echo(f"written: {out / (name + '.json')} {out / (name + '.md')}")
        if not all(r.get("ok") or r.get("dry_run") for r in report["results"].values()):
            raise typer.Exit(1)
