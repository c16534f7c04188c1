"""`ocrserve convert`: files, folders, globs or `-` (a list on stdin) -> Markdown, HTML, JSON, figures."""

from __future__ import annotations

import asyncio
import inspect
import json
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

import typer

from ocrserve.cli import configopt, declared
from ocrserve.pipeline.options import ConvertOptions, OptionsError

# exit codes (README, "Exit codes"): every document converted by its engine (or complete already)
EXIT_OK = 0
EXIT_FAILED = 1  # some document failed (each named, with the reason)
EXIT_USAGE = 2  # bad arguments, an input that names nothing, an output folder that cannot be made
EXIT_DEGRADED = 3  # finished, but some pages came from the fallback (the model failed them): run again
EXIT_NOTHING = 4  # nothing converted: no document in the inputs (only unsupported files, or none)
EXIT_INTERRUPTED = 130  # Ctrl-C / SIGTERM: finished documents are kept; run again to resume


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
                TextColumn("[bold]{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("{task.fields[rate]}"),
                TimeRemainingColumn(),
                console=self.console,
                transient=False,
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
            elif data.get("redo") and not self.quiet:  # an earlier run's fallback pages, converted again
                line = f"redo: {data.get('path') or data['name']} ({data['redo']})"
                self.console.print(line, markup=False, highlight=False, soft_wrap=True)
        elif kind == "page_done":
            self.pages_done += 0 if data.get("resumed") else 1  # the rate of this run's work
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
                self._json(
                    event="doc_done",
                    name=r.name,
                    path=r.path,
                    status=r.status,
                    error=r.error,
                    pages=r.pages,
                    pages_failed=r.pages_failed,
                    pages_fallback=r.pages_fallback,
                    output=str(r.output) if r.output else None,
                    redo=r.redo,
                )
            elif not self.quiet and not self.bar:
                extra = f" ({r.error or r.redo})" if r.error or r.redo else ""
                shown = "skipped" if r.status == "unsupported" else r.status
                self.console.print(
                    f"[{self.docs_done}/{self.docs_total}] {shown}: {r.path}{extra}",
                    markup=False,
                    highlight=False,
                    soft_wrap=True,
                )

    def close(self) -> None:
        if self.bar:
            self.bar.stop()


def plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def summary_line(summary: Any, output: str) -> str:
    """'7 documents: 5 ok, 2 failed; 12 pages in ...', or after Ctrl-C 'interrupted: 3 finished (...), 4 left; ...'."""
    counts = ", ".join(f"{v} {k}" for k, v in sorted(summary.counts().items()))
    converted = summary.pages - summary.pages_resumed  # the pages/s of this run's work, not of pages kept
    rate = converted / summary.elapsed_s if summary.elapsed_s else 0.0
    kept = f", {summary.pages_resumed} kept from an earlier run" if summary.pages_resumed else ""
    pages = f"{plural(converted, 'page')} in {summary.elapsed_s:.1f}s ({rate:.2f} pages/s){kept} -> {output}"
    if summary.interrupted:
        done = f"{summary.finished} finished" + (f" ({counts})" if counts else "")
        return f"interrupted: {done}, {summary.left} left; {pages}"
    return f"{plural(summary.finished, 'document')}: {counts or 'nothing to do'}; {pages}"


def exit_code(summary: Any) -> int:
    """The run's exit code (the EXIT_* codes above): interrupted, else failed, else degraded, else nothing."""
    if summary.interrupted:
        return EXIT_INTERRUPTED
    counts = summary.counts()
    if counts.get("failed"):
        return EXIT_FAILED
    if counts.get("fallback"):
        return EXIT_DEGRADED
    return EXIT_NOTHING if summary.nothing_converted else EXIT_OK


def _report_degraded_and_unsupported(summary: Any) -> None:
    """After the summary: the documents with pages from the fallback, and a run that converted nothing."""
    counts = summary.counts()
    if degraded := counts.get("fallback", 0):
        typer.echo(
            f"{plural(summary.pages_fallback, 'page')} of {plural(degraded, 'document')} came from the fallback "
            "(lite: the model failed them); run again when the model answers to convert them again:",
            err=True,
        )
        for r in summary.degraded:
            typer.echo(f"  {r.path}: {r.pages_fallback} of {r.pages} pages", err=True)
        _more(summary, "fallback")
    if summary.nothing_converted:
        skipped = counts.get("unsupported", 0)
        why = f" ({plural(skipped, 'unsupported file')} skipped)" if skipped else ""
        typer.echo(f"nothing converted: no document to convert in the inputs{why}", err=True)


def _more(summary: Any, status: str) -> None:
    """The documents of a status a long run counted but does not name (RunSummary keeps the first NAMED)."""
    if more := summary.unnamed(status):
        typer.echo(f"  ... and {more} more (--json-log names every document)", err=True)


def _ignore_late_signals() -> None:
    """The run is over and its summary printed: a Ctrl-C from now on is ignored. Python puts the default
    action back for its handled signals while it finalizes, so a late Ctrl-C would otherwise end the
    process by SIGINT instead of exit code 130 (an ignored signal stays ignored). SIGTERM keeps the run's
    handler: a supervisor can still end a shutdown that hangs."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _run(inputs: list[str | Path], options: Any, display: _Display) -> Any:
    """Run the conversion with the scheduler the options ask for (local asyncio, or Ray)."""
    if options.ray is not None:
        from ocrserve.pipeline.ray import run_ray_convert

        return run_ray_convert(inputs, options, on_event=display, keep_results=False)  # memory stays flat
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
        conv = Converter(options, on_event=display, keep_documents=False)  # written: memory stays flat
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


# the command line's own options (how a run shows its progress), declared here once; the conversion's
# options are built from what ConvertOptions declares (ocrserve/cli/declared.py)
_KW = inspect.Parameter.KEYWORD_ONLY
CTX = inspect.Parameter("ctx", _KW, annotation=typer.Context)
INPUTS = inspect.Parameter(
    "inputs",
    _KW,
    annotation=list[str],
    default=typer.Argument(..., help="files, folders (recursive), globs, or - to read paths from stdin"),
)
CLI_ONLY = [
    inspect.Parameter(
        "json_log",
        _KW,
        annotation=bool,
        default=typer.Option(False, "--json-log", help="JSON lines on stdout instead of a progress bar"),
    ),
    inspect.Parameter(
        "quiet", _KW, annotation=bool, default=typer.Option(False, "--quiet", "-q", help="no progress output")
    ),
]


def _check(model: type[ConvertOptions], values: dict[str, Any]) -> None:
    """The config file's [convert] values are options: a bad one is an OptionsError (a ValueError)."""
    from ocrserve.ingest.sources import parse_page_ranges

    model.build(**values)
    if "pages" in values:
        parse_page_ranges(values["pages"])  # InputError (a ValueError): 'pages' named as --pages


def register(app: typer.Typer, options_model: type[ConvertOptions] | None = None) -> None:
    """`convert`, with an option for every flag `options_model` (ConvertOptions) declares."""
    model = options_model or ConvertOptions
    specs = model.declared()
    config = inspect.Parameter(
        "config",
        _KW,
        annotation=str | None,
        default=configopt.config_option(
            "convert",
            known=lambda: specs,
            env_backed=lambda: [n for n, s in specs.items() if s.env],
            default_map=False,  # the table's values are options (some without a flag): merged below
            check=lambda values: _check(model, values),
        ),
    )

    def convert(**values: Any) -> None:
        """Convert documents to Markdown, HTML and JSON (+ figure crops) under OUTPUT/<name>/."""
        from ocrserve.engines import EngineError
        from ocrserve.ingest.sources import InputError

        inputs, json_log, quiet = values.pop("inputs"), values.pop("json_log"), values.pop("quiet")
        ctx, _ = values.pop("ctx"), values.pop("config")
        try:
            flags = declared.chosen(specs, values)  # flag > env > file > default
            given = configopt.from_command_line(ctx, flags)
            options = model.build(**{**flags, **configopt.file_values(ctx), **{k: flags[k] for k in given}})
            if options.ray is not None and (json_log or quiet):  # no Ray progress bars either
                options = options.model_copy(update={"ray": options.ray.model_copy(update={"progress": False})})
            resolved = options.resolve()
        except (OptionsError, EngineError) as e:
            typer.echo(f"error: {e}", err=True)
            raise typer.Exit(2) from None
        output = options.output or ""
        if options.ray is None and "://" in output and not output.startswith("file://"):
            typer.echo(f"error: --output {output}: URL outputs need --ray (a local run writes to a folder)", err=True)
            raise typer.Exit(2)
        if options.static_cache and resolved.engine != "hf":
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
            print(
                json.dumps(
                    {
                        "event": "run_done",
                        "documents": summary.documents,
                        "finished": summary.finished,
                        "left": summary.left,
                        "counts": summary.counts(),
                        "pages": summary.pages,
                        "pages_fallback": summary.pages_fallback,
                        "elapsed_s": round(summary.elapsed_s, 3),
                        "interrupted": summary.interrupted,
                        "exit_code": exit_code(summary),
                    }
                ),
                flush=True,
            )
        elif not quiet:
            typer.echo(summary_line(summary, output), err=True)
        if failed := summary.counts().get("failed", 0):
            typer.echo(f"{plural(failed, 'document')} failed:", err=True)
            for r in summary.failed:
                typer.echo(f"  {r.path}: {r.error}", err=True)
            _more(summary, "failed")
        _report_degraded_and_unsupported(summary)
        if summary.interrupted:
            typer.echo("run again to resume: finished documents are kept", err=True)
            _ignore_late_signals()
        code = exit_code(summary)
        if code != EXIT_OK:
            raise typer.Exit(code)

    app.command("convert")(
        declared.with_signature(convert, [CTX, INPUTS, *declared.parameters(specs), *CLI_ONLY, config])
    )
