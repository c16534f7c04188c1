"""The `ocrserve` command. Each subcommand lives in ocrserve/commands/<name>.py with register(app)."""

from __future__ import annotations

import importlib
import logging

import typer

app = typer.Typer(
    name="ocrserve",
    help="Documents to structured Markdown, HTML and JSON with Chandra OCR models.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

COMMANDS = ["convert", "serve", "api", "mcp", "bench", "eval", "profiles", "config"]


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("ocrserve")
    except PackageNotFoundError:  # run from a source tree that was never installed
        from ocrserve import __version__

        return __version__


def _print_version(value: bool) -> None:
    if value:
        typer.echo(f"ocrserve {_version()}")
        raise typer.Exit()


@app.callback()
def _root(
    verbose: bool = typer.Option(False, "--verbose", "-v", help="debug logging"),
    version: bool = typer.Option(
        False, "--version", "-V", callback=_print_version, is_eager=True, help="print the version and exit"
    ),
) -> None:
    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )


for _name in COMMANDS:
    try:
        _mod = importlib.import_module(f"ocrserve.cli.{_name}")
    except ModuleNotFoundError as e:  # a command not built yet
        if e.name != f"ocrserve.cli.{_name}":
            raise
        continue
    _mod.register(app)


def command():
    """The click command behind `app`, its help in conventional form (no `<bool>`, `{inputs}`)."""
    import typer.main

    from ocrserve.cli.helpfmt import plain_help

    return plain_help(typer.main.get_command(app))


def main() -> None:
    from ocrserve.cli.extras import run_guarded

    run_guarded(command())


if __name__ == "__main__":
    main()
