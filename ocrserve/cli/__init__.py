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

COMMANDS = ["convert", "serve", "api", "bench", "eval", "profiles"]


@app.callback()
def _root(verbose: bool = typer.Option(False, "--verbose", "-v", help="debug logging")) -> None:
    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )


for _name in COMMANDS:
    try:
        _mod = importlib.import_module(f"ocrserve.cli.{_name}")
    except ModuleNotFoundError as e:  # a command not built yet
        if e.name != f"ocrserve.cli.{_name}":
            raise
        continue
    _mod.register(app)


def main() -> None:
    app()


if __name__ == "__main__":
    main()
