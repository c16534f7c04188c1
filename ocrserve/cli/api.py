"""`ocrserve api`: the OCR HTTP service in front of an engine (an OpenAI-compatible server, or lite/hf)."""

from __future__ import annotations

import logging
from pathlib import Path

import typer

from ocrserve.cli.configopt import config_option, file_values
from ocrserve.settings import Settings

API_OPTIONS = ("server", "engine", "host", "port", "data_dir", "model", "api_key")


def register(app: typer.Typer) -> None:
    @app.command("api")
    def api(
        ctx: typer.Context,
        server: str = typer.Option(
            None, "--server", help="OpenAI-compatible server (vLLM), e.g. http://localhost:8000/v1"
        ),
        engine: str = typer.Option(
            None, "--engine", help="lite, openai or hf (default: openai with --server, else lite)"
        ),
        host: str = typer.Option("127.0.0.1", "--host", help="address to listen on"),
        port: int = typer.Option(8080, "--port", help="port to listen on"),
        data_dir: Path = typer.Option(None, "--data-dir", help="jobs database and files (default: OCRSERVE_DATA_DIR)"),
        model: str = typer.Option(
            None,
            "--model",
            help="model profile: chandra-2, chandra-1 or a profile file (default: OCRSERVE_MODEL, else chandra-2)",
        ),
        api_key: str = typer.Option(None, "--api-key", help="API key of the engine server (not of this API)"),
        config: str | None = config_option(
            "api", known=lambda: [*API_OPTIONS, *Settings.model_fields]
        ),  # [api]: these options and any Settings knob
    ) -> None:
        """Serve the OCR API: /v1/convert (sync, streaming), /v1/jobs, /metrics, /docs and a viewer at /."""
        from ocrserve.cli.extras import require

        require("api", "ocrserve api")
        from ocrserve.api import run_api
        from ocrserve.api.auth import KeyFileError
        from ocrserve.engines import ENGINE_NAMES
        from ocrserve.settings import get_settings

        if engine is not None and engine not in ENGINE_NAMES:
            raise typer.BadParameter(f"{engine!r}: use one of {', '.join(ENGINE_NAMES)}", param_hint="--engine")
        logging.getLogger("ocrserve").setLevel(logging.INFO)
        if not logging.getLogger().handlers:
            logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
        knobs = {k: v for k, v in file_values(ctx).items() if k not in API_OPTIONS}  # [api]'s Settings knobs
        settings = get_settings(**knobs, server=server, engine=engine, data_dir=data_dir, model=model, api_key=api_key)
        typer.echo(f"ocrserve api on http://{host}:{port} (viewer at /, docs at /docs), data in {settings.data_dir}")
        try:
            run_api(settings, host=host, port=port)
        except KeyFileError as e:
            typer.echo(f"error: {e}", err=True)
            raise typer.Exit(2) from None
