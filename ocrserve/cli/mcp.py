"""`ocrserve mcp`: the MCP server (tools to convert documents and follow jobs; a document's Markdown and JSON
as resources) over stdio, for a desktop client that starts it, or streamable HTTP."""

from __future__ import annotations

import logging
from pathlib import Path

import typer


def register(app: typer.Typer) -> None:
    @app.command("mcp")
    def mcp(
        transport: str = typer.Option(
            "stdio",
            "--transport",
            help="stdio (a client starts this process) or http (streamable HTTP at http://HOST:PORT/mcp)",
        ),
        allow_root: list[Path] = typer.Option(
            None,
            "--allow-root",
            help="a folder whose documents a client may convert by path (repeatable; default: the current folder)",
        ),
        host: str = typer.Option("127.0.0.1", "--host", help="http: address to listen on"),
        port: int = typer.Option(8765, "--port", help="http: port to listen on"),
        server: str = typer.Option(
            None,
            "--server",
            help="OpenAI-compatible server (vLLM), e.g. http://localhost:8000/v1; the default engine is then openai",
        ),
        engine: str = typer.Option(
            None, "--engine", help="default engine: lite, openai or hf (default: openai with --server, else lite)"
        ),
        model: str = typer.Option(
            None,
            "--model",
            help="default model profile: chandra-2, chandra-1 or a profile "
            "file (default: OCRSERVE_MODEL, else what the server serves, else chandra-2)",
        ),
        api_key: str = typer.Option(
            None,
            "--api-key",
            help="API key of the engine server (clients of the MCP "
            "server over HTTP use OCRSERVE_API_KEYS, as `ocrserve api`)",
        ),
    ) -> None:
        """Serve documents to LLM agents over the Model Context Protocol (stdio or streamable HTTP): tools
        convert_document, submit_job, job_status and job_result; a document's Markdown and JSON as resources."""
        from ocrserve.cli.extras import require

        require("mcp", "ocrserve mcp")
        import anyio

        from ocrserve.api.auth import Auth, KeyFileError, load_keys
        from ocrserve.engines import ENGINE_NAMES
        from ocrserve.mcp.documents import DocumentService, RequestError
        from ocrserve.mcp.server import roots_of, serve_http, serve_stdio
        from ocrserve.settings import get_settings

        if transport not in ("stdio", "http"):
            raise typer.BadParameter(f"{transport!r}: use stdio or http", param_hint="--transport")
        if engine is not None and engine not in ENGINE_NAMES:
            raise typer.BadParameter(f"{engine!r}: use one of {', '.join(ENGINE_NAMES)}", param_hint="--engine")
        log = logging.getLogger("ocrserve")
        log.setLevel(logging.INFO)
        settings = get_settings(server=server, engine=engine, model=model, api_key=api_key)
        try:
            roots = roots_of(allow_root)
            keys = load_keys(settings) if transport == "http" else []
        except (RequestError, KeyFileError) as e:
            typer.echo(f"error: {e}", err=True)
            raise typer.Exit(2) from None
        service = DocumentService(settings, roots, engine=engine, model=model)
        where = ", ".join(str(r.resolve()) for r in roots)
        if transport == "stdio":  # stdout is the protocol's: everything else goes to stderr
            typer.echo(f"ocrserve mcp on stdio; documents by path from {where}", err=True)
            anyio.run(serve_stdio, service)
            return
        auth = Auth(keys)
        if auth.open:
            log.warning(
                "no API keys (OCRSERVE_API_KEYS): every client of http://%s:%d/mcp may convert documents under %s",
                host,
                port,
                where,
            )
        typer.echo(f"ocrserve mcp on http://{host}:{port}/mcp; documents by path from {where}", err=True)
        anyio.run(serve_http, service, auth, host, port)
