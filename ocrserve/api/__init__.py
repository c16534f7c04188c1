"""The OCR HTTP service (FastAPI). `create_app(settings, engine)` builds it; `run_api(...)` serves it with uvicorn."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # fastapi is the `api` extra: import it only when the service is used
    from fastapi import FastAPI

    from ocrserve.settings import Settings

log = logging.getLogger(__name__)


def create_app(settings: Settings | None = None, engine: Any = None) -> FastAPI:
    from ocrserve.api.app import create_app as _create_app

    return _create_app(settings, engine)


def run_api(
    settings: Settings | None = None,
    host: str = "127.0.0.1",
    port: int = 8080,
    server_url: str | None = None,
    engine: Any = None,
    log_level: str = "info",
) -> None:
    """Serve the API until stopped. With server_url, the openai engine talks to that server (vLLM)."""
    import uvicorn

    from ocrserve.api.server import uvicorn_options
    from ocrserve.settings import get_settings

    settings = settings or get_settings()
    if server_url:
        settings = settings.model_copy(update={"server": server_url, "engine": settings.engine or "openai"})
    app = create_app(settings, engine)
    uvicorn.run(app, host=host, port=port, log_level=log_level, **uvicorn_options(settings))


__all__ = ["create_app", "run_api"]
