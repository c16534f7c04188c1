"""`ocrserve bench`: ocrserve's pipeline beside a plain client and the engine's ceiling, on one server."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path
from typing import Optional

import typer


def register(app: typer.Typer) -> None:
    @app.command("bench")
    def bench(
        corpus: Optional[str] = typer.Argument(None, help="folder or PDF file of pages (or use --synthetic N)"),
        server: str = typer.Option(..., "--server", help="OpenAI-compatible server URL (vLLM)"),
        synthetic: Optional[int] = typer.Option(None, "--synthetic", help="N distinct generated pages instead of a corpus"),
        modes: str = typer.Option("pipeline,plain,ceiling,stages", "--modes",
                                  help="comma-separated: pipeline, plain, ceiling, stages (client CPU per stage)"),
        model: Optional[str] = typer.Option(None, "--model", "-m", help="model profile: chandra-2, chandra-1 or a profile "
                                            "file (default: what the server serves, else chandra-2)"),
        concurrency: int = typer.Option(128, "--concurrency", "-c", help="requests in flight (pipeline and ceiling)"),
        plain_batch: int = typer.Option(28, "--plain-batch", help="the plain client's batch (Chandra CLI: 28; 1 = sequential)"),
        max_tokens: int = typer.Option(1024, "--max-tokens", help="output tokens per page"),
        ignore_eos: bool = typer.Option(True, "--ignore-eos/--no-ignore-eos", help="fix the output length (weightless models)"),
        api_key: Optional[str] = typer.Option(None, "--api-key", help="API key for the server (default: OCRSERVE_API_KEY)"),
        stream_probe: int = typer.Option(5, "--stream-probe", help="pages streamed one by one on the idle server (0 = skip)"),
        gpu_peak_tflops: Optional[float] = typer.Option(None, "--gpu-peak-tflops", help="GPU bf16 dense peak for MFU"),
        seed: int = typer.Option(0, "--seed", help="synthetic corpus seed"),
        stage_pages: int = typer.Option(40, "--stage-pages", min=1, help="pages of the client CPU split (stages mode), one at a time"),
        plain_pages: Optional[int] = typer.Option(None, "--plain-pages", min=1,
                                                  help="the plain mode sends only the corpus's first N pages (it is the slow one)"),
        out: Path = typer.Option(Path("bench/results"), "--out", help="folder for the JSON and Markdown report"),
        name: Optional[str] = typer.Option(None, "--name", help="report name (default: bench-<timestamp>)"),
    ) -> None:
        """Measure pages/s, latency, time to first block, client CPU and GPU memory against a live server."""
        import time

        from ocrserve.bench.runner import run_bench, write_report
        from ocrserve.settings import get_settings

        mode_list = [m.strip() for m in modes.split(",") if m.strip()]
        name = name or time.strftime("bench-%Y%m%d-%H%M%S")
        command = "ocrserve " + " ".join(shlex.quote(a) for a in sys.argv[1:])
        try:
            report = run_bench(server=server, corpus=corpus, synthetic=synthetic, modes=mode_list, model=model,
                               concurrency=concurrency, plain_batch=plain_batch, max_tokens=max_tokens,
                               ignore_eos=ignore_eos, api_key=api_key or get_settings().api_key, stream_probe=stream_probe,
                               gpu_peak_tflops=gpu_peak_tflops, seed=seed, command=command, stage_pages=stage_pages,
                               plain_pages=plain_pages,
                               on_partial=lambda rep: write_report(rep, out, name))
        except ValueError as e:
            typer.echo(f"error: {e}", err=True)
            raise typer.Exit(2) from None
        jp, mp = write_report(report, out, name)
        typer.echo(mp.read_text())
        typer.echo(f"written: {jp} {mp}", err=True)
