"""Serving the API with uvicorn: connection limits and timeouts from the settings.

- `api_max_connections`: uvicorn's `limit_concurrency` (open connections and requests; more answer 503).
- `api_header_timeout_s`: a connection that has not sent a whole request head within this time (after
  it opened, or after its previous answer) is closed. uvicorn has no such timeout; `HeaderTimeoutH11`
  adds it to its h11 protocol.
- `api_body_timeout_s` is the app's: the upload is read under that deadline (see routes/upload.py).
"""

from __future__ import annotations

import asyncio
from typing import Any

from uvicorn.protocols.http.h11_impl import H11Protocol

from ocrserve.settings import Settings


class HeaderTimeoutH11(H11Protocol):
    """uvicorn's h11 protocol with a deadline for each request head."""

    header_timeout_s = 10.0

    # uvicorn's own signature, which narrows asyncio.Protocol's BaseTransport (uvicorn ignores it too)
    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._head_deadline: asyncio.TimerHandle | None = None
        self._arm()

    def _arm(self) -> None:
        self._disarm()
        if self.header_timeout_s > 0:
            self._head_deadline = self.loop.call_later(self.header_timeout_s, self._head_timed_out)

    def _disarm(self) -> None:
        if self._head_deadline is not None:
            self._head_deadline.cancel()
            self._head_deadline = None

    def handle_events(self) -> None:
        cycle = self.cycle
        super().handle_events()
        if self.cycle is not cycle:  # a request head arrived: the app has it now
            self._disarm()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._arm()  # the next request's head has its own deadline

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def _head_timed_out(self) -> None:
        self._head_deadline = None
        if (self.cycle is None or self.cycle.response_complete) and not self.transport.is_closing():
            self.logger.info("closing a connection that sent no request head within %g s", self.header_timeout_s)
            self.transport.close()


def uvicorn_options(settings: Settings) -> dict[str, Any]:
    """The keyword arguments of uvicorn.run / uvicorn.Config that the API's settings decide."""
    proto = type("HeaderTimeoutH11", (HeaderTimeoutH11,), {"header_timeout_s": float(settings.api_header_timeout_s)})
    return {
        "http": proto,
        "limit_concurrency": settings.api_max_connections if settings.api_max_connections > 0 else None,
        "timeout_keep_alive": 5,
        "backlog": 2048,
    }
