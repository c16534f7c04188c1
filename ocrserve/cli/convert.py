"""`ocrserve convert`: files, folders, globs or `-` (a list on stdin) -> Markdown, HTML, JSON, figures."""

from __future__ import annotations

import asyncio
import json
import signal
import sys
import time
from typing import Any, Optional

import typer


class _Display:
    """Progress bar on a terminal, plain lines otherwise, JSON lines with --json-log."""

    def __init__(self, json_log: bool, quiet: bool) -> None:
        from rich.console import Console

        self.console = Console(stderr=True)
        self.json_log = json_log
        self.quiet = quiet
        self.bar = None
        self.t0 = time.perf_counter()
        self.pages_done = 0
        self.pages_total = 0
        self.docs_done = 0
        self.docs_total = 0
        if not json_log and not quiet and self.console.is_terminal:
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

            self.bar = Progress(
                TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                TextColumn("{task.fields[rate]}"), TimeRemainingColumn(), console=self.console, transient=False,
            )
            self.docs_task = self.bar.add_task("documents", total=None, rate="")
            self.pages_task = self.bar.add_task("pages", total=0, rate="")
            self.bar.start()

    def _json(self, **data: Any) -> None:
        print(json.dumps(data, default=str), flush=True)

    def __call__(self, kind: str, data: dict) -> None:
        if kind == "run_start":
            self.docs_total = data["documents"]
            if self.bar:
                self.bar.update(self.docs_task, total=self.docs_total)
            if self.json_log:
                self._json(event="run_start", documents=self.docs_total)
        elif kind == "doc_start":
            self.pages_total += data["pages"]
            if self.bar:
                self.bar.update(self.pages_task, total=self.pages_total)
            if self.json_log:
                self._json(event="doc_start", **data)
        elif kind == "page_done":
            self.pages_done += 1
            rate = self.pages_done / max(1e-9, time.perf_counter() - self.t0)
            if self.bar:
                self.bar.update(self.pages_task, advance=1, rate=f"{rate:.2f} pages/s")
            if self.json_log:
                self._json(event="page_done", **{k: v for k, v in data.items() if k != "page"})
        elif kind == "doc_done":
            r = data["result"]
            self.docs_done += 1
            if self.bar:
                self.bar.update(self.docs_task, advance=1)
            if self.json_log:
                self._json(event="doc_done", name=r.name, path=r.path, status=r.status, error=r.error,
                           pages=r.pages, pages_failed=r.pages_failed, pages_fallback=r.pages_fallback,
                           output=str(r.output) if r.output else None)
            elif not self.quiet and not self.bar:
                extra = f" ({r.error})" if r.error else ""
                self.console.print(f"[{self.docs_done}/{self.docs_total}] {r.status}: {r.path}{extra}", markup=False, highlight=False, soft_wrap=True)

    def close(self) -> None:
        if self.bar:
            self.bar.stop()


def register(app: typer.Typer) -> None:
    @app.command("convert")
    def convert(
        inputs: list[str] = typer.Argument(..., help="files, folders (recursive), globs, or - to read paths from stdin"),
        output: str = typer.Option("ocrserve-out", "--output", "-o", help="output folder (with --ray also an fsspec URL)"),
        engine: Optional[str] = typer.Option(None, "--engine", "-e", help="lite (default without a server), openai, hf"),
        model: Optional[str] = typer.Option(None, "--model", "-m", help="model profile: chandra-1 (default, or OCRSERVE_MODEL), chandra-2 or a profile file"),
        server: Optional[str] = typer.Option(None, "--server", help="OpenAI-compatible server URL (vLLM), implies --engine openai"),
        api_key: Optional[str] = typer.Option(None, "--api-key", envvar="OCRSERVE_API_KEY", help="API key for the server"),
        served_model: Optional[str] = typer.Option(None, "--served-model", help="model name on the server (default: asked)"),
        concurrency: Optional[int] = typer.Option(None, "--concurrency", "-c", help="pages in flight (default: sized for vLLM)"),
        pages: Optional[str] = typer.Option(None, "--pages", help="page ranges, e.g. 1-5,9"),
        password: Optional[str] = typer.Option(None, "--password", help="password for encrypted PDFs"),
        force: bool = typer.Option(False, "--force", help="redo documents that are already complete"),
        no_fallback: bool = typer.Option(False, "--no-fallback", help="do not rescue failed pages with the lite engine"),
        keep_headers_footers: bool = typer.Option(False, "--keep-headers-footers", help="keep page headers/footers in Markdown"),
        formats: Optional[list[str]] = typer.Option(
            None, "--format",
            help="output files, repeatable or a comma list: md, html, json, pdf (searchable PDF), chunks "
                 "(<name>.chunks.jsonl for retrieval); default md,html,json. json is always written: it "
                 "marks a document complete"),
        checkpoint: Optional[str] = typer.Option(None, "--checkpoint", help="hf engine: Hub id or folder (default: the profile's)"),
        device: Optional[str] = typer.Option(None, "--device", help="hf engine: cuda, mps or cpu"),
        batch_size: Optional[int] = typer.Option(None, "--batch-size", help="hf engine: pages per generate() batch"),
        compile_: bool = typer.Option(
            False, "--compile",
            help="hf engine: static KV cache, decoding compiled with torch.compile on CUDA (the first batch of "
                 "each size compiles for 1-2 minutes; then 1.4-8.6x faster on an H200, bench/results/gpu-h200/hf-engine)"),
        render_workers: Optional[int] = typer.Option(None, "--render-workers", help="page-rendering processes"),
        max_tokens: Optional[int] = typer.Option(None, "--max-tokens", help="output token limit a page (default: the profile's)"),
        ignore_eos: bool = typer.Option(False, "--ignore-eos", help="benchmarks with weightless models: always generate --max-tokens"),
        json_log: bool = typer.Option(False, "--json-log", help="JSON lines on stdout instead of a progress bar"),
        quiet: bool = typer.Option(False, "--quiet", "-q", help="no progress output"),
        ray: Optional[str] = typer.Option(
            None, "--ray", metavar="ADDRESS",
            help="run on a Ray cluster: auto (the running cluster), local (a fresh one on this machine) or "
                 "ray://head:10001; OUTPUT may then be an fsspec URL (s3://...)"),
    ) -> None:
        """Convert documents to Markdown, HTML and JSON (+ figure crops) under OUTPUT/<name>/."""
        from ocrserve.engines import EngineError
        from ocrserve.ingest.sources import InputError
        from ocrserve.pipeline.local import Converter, RunSummary

        if server and engine is None:
            engine = "openai"
        from ocrserve.render.formats import DEFAULT_FORMATS, parse_formats  # (#20)

        try:
            formats_ = parse_formats(formats)
        except ValueError as e:
            typer.echo(f"error: --format: {e}", err=True)
            raise typer.Exit(2) from None
        if ray is not None and formats_ != DEFAULT_FORMATS:
            typer.echo("error: --format with --ray: a Ray run writes md, html and json only", err=True)
            raise typer.Exit(2)
        if not ray and "://" in output:
            if output.startswith("file://"):
                output = output[len("file://"):]
            else:
                typer.echo(f"error: --output {output}: URL outputs need --ray (a local run writes to a folder)", err=True)
                raise typer.Exit(2)
        opts: dict[str, Any] = {}
        for k, v in dict(server=server, api_key=api_key, served_model=served_model, checkpoint=checkpoint,
                         device=device, batch_size=batch_size, max_tokens=max_tokens).items():
            if v is not None:
                opts[k] = v
        if ignore_eos:
            opts["ignore_eos"] = True
        if compile_:
            opts["static_cache"] = True
            from ocrserve.settings import get_settings

            if (engine or get_settings().engine) != "hf":
                typer.echo("warning: --compile is for the hf engine (--engine hf); ignored", err=True)
        display = _Display(json_log, quiet)

        async def main() -> Any:
            conv = Converter(
                engine=engine, model=model, output_dir=output, pages=pages, password=password, force=force,
                fallback=False if no_fallback else None, keep_headers_footers=keep_headers_footers,
                on_event=display, concurrency=concurrency, render_workers=render_workers, **opts,
                formats=formats_,  # (#20)
            )
            task = asyncio.current_task()
            loop = asyncio.get_running_loop()
            for sig in (signal.SIGINT, signal.SIGTERM):
                try:
                    loop.add_signal_handler(sig, task.cancel)
                except (NotImplementedError, RuntimeError):
                    pass
            try:
                return await conv.run(inputs)
            except asyncio.CancelledError:  # Ctrl-C / SIGTERM: what finished is kept
                return conv.last_summary or RunSummary(interrupted=True)
            finally:
                await conv.aclose()

        try:
            if ray is not None:
                from ocrserve.pipeline.ray import run_ray_convert

                summary = run_ray_convert(
                    inputs, address=ray, output=str(output), engine=engine, model=model, pages=pages, password=password,
                    force=force, fallback=False if no_fallback else None, keep_headers_footers=keep_headers_footers,
                    on_event=display, concurrency=concurrency, ray_progress=not (json_log or quiet), **opts,
                )
            else:
                summary = asyncio.run(main())
        except (InputError, EngineError, ValueError) as e:
            display.close()
            typer.echo(f"error: {e}", err=True)
            raise typer.Exit(2) from None
        display.close()
        counts = summary.counts()
        rate = summary.pages / summary.elapsed_s if summary.elapsed_s else 0.0
        line = ", ".join(f"{v} {k}" for k, v in sorted(counts.items())) or "nothing to do"
        msg = f"{len(summary.results)} documents: {line}; {summary.pages} pages in {summary.elapsed_s:.1f}s ({rate:.2f} pages/s) -> {output}"
        if json_log:
            print(json.dumps({"event": "run_done", "documents": len(summary.results), "counts": counts,
                              "pages": summary.pages, "elapsed_s": round(summary.elapsed_s, 3),
                              "interrupted": summary.interrupted}), flush=True)
        elif not quiet:
            typer.echo(msg, err=True)
        if summary.failed:
            typer.echo(f"{len(summary.failed)} failed:", err=True)
            for r in summary.failed:
                typer.echo(f"  {r.path}: {r.error}", err=True)
        if summary.interrupted:
            typer.echo("interrupted: finished documents are kept; run again to resume", err=True)
            raise typer.Exit(130)
        if summary.failed:
            raise typer.Exit(1)
