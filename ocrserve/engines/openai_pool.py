"""The openai engine's connection pool: httpcore's, without its cost that grows with the square of the
connections (issue 28 item 5).

httpcore 1.0's `AsyncConnectionPool._assign_requests_to_connections` runs on every request and every
answer read; for each idle connection it counts the pool's connections with a list of `is_idle()` calls
(the length of that list is the number of connections, idle or not), so with the engine's 128
connections a request cost some 10 ms of CPU in that count alone. `LinearPool` is the same method with
that count taken as `len(self._connections)`, which is exactly what the list's length was, and the first
available (or idle) connection found without a list of them all: the same connections closed, kept and
assigned, in the same order. Everything else is httpcore's.

The same method also asks every idle connection whether the server closed it (its socket readable);
anyio answers that by building the stream's whole attribute table (a getpeername call among them) each
time. `_Backend` wraps the pool's network backend so that each stream keeps its socket and polls it
directly: the same poll of the same socket, as httpcore's `is_socket_readable` does it.

`linear_pools(client)` switches a client's own pool (not a proxy's) to both, when it is httpcore's
`AsyncConnectionPool` with the attributes this relies on; otherwise the client is left as it is.
"""

from __future__ import annotations

import select
import socket
import ssl
import sys
from collections.abc import Iterable
from typing import Any

import httpcore
import httpx

_NEEDS = (
    "_assign_requests_to_connections",
    "_network_backend",
    "_connections",
    "_requests",
    "_max_connections",
    "_max_keepalive_connections",
    "create_connection",
)


class LinearPool(httpcore.AsyncConnectionPool):
    """httpcore's pool; connections counted once per connection, not once per connection per connection."""

    def _assign_requests_to_connections(self) -> list[httpcore.AsyncConnectionInterface]:
        # httpcore 1.0.9's method, verbatim but for the keep-alive count and the first-match lists (see the module's docstring).
        closing_connections = []

        # First we handle cleaning up any connections that are closed,
        # have expired their keep-alive, or surplus idle connections.
        for connection in list(self._connections):
            if connection.is_closed():
                self._connections.remove(connection)
            elif connection.has_expired():
                self._connections.remove(connection)
                closing_connections.append(connection)
            elif connection.is_idle() and len(self._connections) > self._max_keepalive_connections:
                self._connections.remove(connection)
                closing_connections.append(connection)

        # Assign queued requests to connections.
        queued_requests = [request for request in self._requests if request.is_queued()]
        for pool_request in queued_requests:
            origin = pool_request.request.url.origin
            # (the first connection of each kind, as httpcore's lists' first items; no list made)
            available = next((c for c in self._connections if c.can_handle_request(origin) and c.is_available()), None)

            # 1. an existing connection can handle the request; 2. a new connection can be made for it;
            # 3. an idle connection is closed and a new one made for it.
            if available is not None:
                pool_request.assign_to_connection(available)
            elif len(self._connections) < self._max_connections:
                connection = self.create_connection(origin)
                self._connections.append(connection)
                pool_request.assign_to_connection(connection)
            elif (idle := next((c for c in self._connections if c.is_idle()), None)) is not None:
                self._connections.remove(idle)
                closing_connections.append(idle)
                connection = self.create_connection(origin)
                self._connections.append(connection)
                pool_request.assign_to_connection(connection)

        return closing_connections


def is_socket_readable(sock: socket.socket | None) -> bool:
    """httpcore's test (httpcore/_utils.py): data or EOF waiting on the socket; a socket gone counts as EOF."""
    fd = None if sock is None else sock.fileno()
    if fd is None or fd < 0:
        return True
    if sys.platform == "win32" or getattr(select, "poll", None) is None:
        ready, _, _ = select.select([fd], [], [], 0)
        return bool(ready)
    p = select.poll()
    p.register(fd, select.POLLIN)
    return bool(p.poll(0))


class _Stream(httpcore.AsyncNetworkStream):
    """A network stream that answers "is_readable" from its socket, kept from the start."""

    def __init__(self, inner: httpcore.AsyncNetworkStream) -> None:
        self._inner = inner
        self._sock = inner.get_extra_info("socket")

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return await self._inner.read(max_bytes, timeout)

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:
        await self._inner.write(buffer, timeout)

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def start_tls(
        self, ssl_context: ssl.SSLContext, server_hostname: str | None = None, timeout: float | None = None
    ) -> httpcore.AsyncNetworkStream:
        return _Stream(await self._inner.start_tls(ssl_context, server_hostname, timeout))

    def get_extra_info(self, info: str) -> Any:
        if info == "is_readable" and self._sock is not None:
            return is_socket_readable(self._sock)
        return self._inner.get_extra_info(info)


class _Backend(httpcore.AsyncNetworkBackend):
    """The pool's network backend, its streams wrapped in `_Stream`."""

    def __init__(self, inner: httpcore.AsyncNetworkBackend) -> None:
        self._inner = inner

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        return _Stream(await self._inner.connect_tcp(host, port, timeout, local_address, socket_options))

    async def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Iterable[Any] | None = None
    ) -> httpcore.AsyncNetworkStream:
        return _Stream(await self._inner.connect_unix_socket(path, timeout, socket_options))

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


def linear_pools(client: httpx.AsyncClient) -> bool:
    """Switch the client's own connection pool to `LinearPool` over `_Backend`; True if it was switched."""
    pool = getattr(getattr(client, "_transport", None), "_pool", None)
    if type(pool) is not httpcore.AsyncConnectionPool or not all(hasattr(pool, a) for a in _NEEDS):
        return False
    pool.__class__ = LinearPool
    pool._network_backend = _Backend(pool._network_backend)
    return True
