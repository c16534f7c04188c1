"""`ocrserve convert`: files, folders, globs or `-` (a list on stdin) -> Markdown, HTML, JSON, figures."""

from __future__ import annotations

import asyncio
import json
import os
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


def plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def summary_line(summary: Any, output: str) -> str:
    """'7 documents: 5 ok, 2 failed; 12 pages in ...', or after Ctrl-C 'interrupted: 3 finished (...), 4 left; ...'."""
    counts = ", ".join(f"{v} {k}" for k, v in sorted(summary.counts().items()))
    rate = summary.pages / summary.elapsed_s if summary.elapsed_s else 0.0
    pages = f"{plural(summary.pages, 'page')} in {summary.elapsed_s:.1f}s ({rate:.2f} pages/s) -> {output}"
    if summary.interrupted:
        done = f"{len(summary.results)} finished" + (f" ({counts})" if counts else "")
        return f"interrupted: {done}, {summary.left} left; {pages}"
    return f"{plural(len(summary.results), 'document')}: {counts or 'nothing to do'}; {pages}"


def _ignore_late_signals() -> None:
    """The run is over and its summary printed: a Ctrl-C from now on is ignored. Python puts the default
    action back for its handled signals while it finalizes, so a late Ctrl-C would otherwise end the
    process by SIGINT instead of exit code 130 (an ignored signal stays ignored). SIGTERM keeps the run's
    handler: a supervisor can still end a shutdown that hangs."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _run(inputs: list[str], options: Any, display: _Display) -> Any:
    """Run the conversion with the scheduler the options ask for (local asyncio, or Ray)."""
    if options.ray is not None:
        from ocrserve.pipeline.ray import run_ray_convert

        return run_ray_convert(inputs, options, on_event=display)
    from ocrserve.pipeline.local import Converter, RunSummary

    signals = 0
    running: dict[str, Any] = {}  # the loop and the task of the run, once it runs

    def on_signal(task: asyncio.Task | None) -> None:
        """Ctrl-C / SIGTERM stops the run (finished documents are kept, unfinished ones cleaned up); a
        second one while it stops says so; a third quits at once (the next run cleans what is left)."""
        nonlocal signals
        signals += 1
        if signals == 1 and task is not None:
            task.cancel()
        elif signals == 1:  # before the run started, or after it ended: nothing to wait for
            os._exit(130)
        elif signals == 2:
            print("stopping: finishing the documents being written; Ctrl-C again to quit at once", file=sys.stderr)
        else:
            os._exit(130)

    def handler(signum: int, frame: Any) -> None:
        # a process-wide handler (not the loop's): it stays in place until the process exits, so a late
        # Ctrl-C while the loop shuts down never becomes a KeyboardInterrupt traceback
        loop, task = running.get("loop"), running.get("task")
        if loop is not None and not loop.is_closed() and task is not None and not task.done():
            loop.call_soon_threadsafe(on_signal, task)
        else:
            on_signal(None) if signals == 0 else on_signal(task)

    async def main() -> Any:
        conv = Converter(options, on_event=display)
        running.update(loop=asyncio.get_running_loop(), task=asyncio.current_task())
        try:
            return await conv.run(inputs)
        except asyncio.CancelledError:  # Ctrl-C / SIGTERM: what finished is kept
            return conv.last_summary or RunSummary(interrupted=True)
        finally:
            await conv.aclose()

    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, handler)
    return asyncio.run(main())


def register(app: typer.Typer) -> None:
    @app.command("convert")
    def convert(
        inputs: list[str] = typer.Argument(..., help="files, folders (recursive), globs, or - to read paths from stdin"),
        output: str = typer.Option("ocrserve-out", "--output", "-o", help="output folder (with --ray also an fsspec URL)"),
        engine: Optional[str] = typer.Option(None, "--engine", "-e", help="lite (default without a server), openai, hf"),
        model: Optional[str] = typer.Option(None, "--model", "-m", help="model profile: chandra-2, chandra-1 or a profile file (default: what --server serves, else chandra-2; OCRSERVE_MODEL)"),
        server: Optional[str] = typer.Option(None, "--server", help="OpenAI-compatible server URL (vLLM), implies --engine openai"),
        api_key: Optional[str] = typer.Option(None, "--api-key", help="API key for the server (default: OCRSERVE_API_KEY)"),
        served_model: Optional[str] = typer.Option(None, "--served-model", help="model name on the server (default: asked)"),
        concurrency: Optional[int] = typer.Option(None, "--concurrency", "-c", help="pages in flight (default: sized for vLLM)"),
        pages: Optional[str] = typer.Option(None, "--pages", help="page ranges, e.g. 1-5,9"),
        password: Optional[str] = typer.Option(None, "--password", help="password for encrypted PDFs"),
        force: bool = typer.Option(False, "--force", help="redo documents that are already complete"),
        no_fallback: bool = typer.Option(False, "--no-fallback", help="do not rescue failed pages with the lite engine"),
        keep_headers_footers: bool = typer.Option(False, "--keep-headers-footers", help="keep page headers/footers in Markdown"),
        paginate: bool = typer.Option(
            False, "--paginate", help="page separators in the Markdown: before each page but the first, a line with its "
                                      "0-based page index in braces and 48 dashes (as chandra's --paginate_output)"),
        no_images: bool = typer.Option(
            False, "--no-images", help="no figure crops (images/ stays empty) and no image lines in the Markdown; "
                                       "a figure keeps its description as text"),
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
        max_tokens: Optional[int] = typer.Option(None, "--max-tokens", help="output token limit a page (default: the profile's: 12384 chandra-2, 8192 chandra-1); a page that reaches it is kept and marked truncated"),
        max_retries: Optional[int] = typer.Option(None, "--max-retries", help="retries of a page whose answer loops, at the model's retry sampling (default: 6)"),
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
        from ocrserve.pipeline.options import ConvertOptions, OptionsError, RayOptions

        try:
            options = ConvertOptions.build(
                engine=engine, model=model, output=output, pages=pages, password=password, force=force,
                fallback=False if no_fallback else None, keep_headers_footers=keep_headers_footers or None,
                paginate=paginate, figures=not no_images,
                concurrency=concurrency, render_workers=render_workers, server=server, api_key=api_key,
                served_model=served_model, checkpoint=checkpoint, device=device, batch_size=batch_size,
                max_tokens=max_tokens, max_retries=max_retries, ignore_eos=ignore_eos, static_cache=compile_, formats=formats or None,
                ray=RayOptions(address=ray, progress=not (json_log or quiet)) if ray is not None else None,
            )
            resolved = options.resolve()
        except (OptionsError, EngineError) as e:
            typer.echo(f"error: {e}", err=True)
            raise typer.Exit(2) from None
        if ray is None and "://" in output and not output.startswith("file://"):
            typer.echo(f"error: --output {output}: URL outputs need --ray (a local run writes to a folder)", err=True)
            raise typer.Exit(2)
        if compile_ and resolved.engine != "hf":
            typer.echo("warning: --compile is for the hf engine (--engine hf); ignored", err=True)
            options = options.model_copy(update={"static_cache": False})
        display = _Display(json_log, quiet)
        try:
            summary = _run(inputs, options, display)
        except (InputError, EngineError, ValueError) as e:
            display.close()
            typer.echo(f"error: {e}", err=True)
            raise typer.Exit(2) from None
        display.close()
        if json_log:
            print(json.dumps({"event": "run_done", "documents": summary.documents, "finished": len(summary.results),
                              "left": summary.left, "counts": summary.counts(), "pages": summary.pages,
                              "elapsed_s": round(summary.elapsed_s, 3), "interrupted": summary.interrupted}), flush=True)
        elif not quiet:
            typer.echo(summary_line(summary, output), err=True)
        if summary.failed:
            typer.echo(f"{plural(len(summary.failed), 'document')} failed:", err=True)
            for r in summary.failed:
                typer.echo(f"  {r.path}: {r.error}", err=True)
        if summary.interrupted:
            typer.echo("run again to resume: finished documents are kept", err=True)
            _ignore_late_signals()
            raise typer.Exit(130)
        if summary.failed:
            raise typer.Exit(1)
