"""`python -m ocrserve.vllm ...` = `ocrserve serve ...` without loading the other subcommands (fewer dependencies)."""

from __future__ import annotations

import logging

import typer

from ocrserve.cli.serve import register

app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)
register(app)


@app.callback()
def _root(verbose: bool = typer.Option(False, "--verbose", "-v")) -> None:
    logging.basicConfig(level=logging.INFO if verbose else logging.WARNING,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")


if __name__ == "__main__":
    app()
