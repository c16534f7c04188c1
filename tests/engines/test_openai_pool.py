"""The openai engine's connection pool (engines/openai_pool.py): httpcore's decisions, without the cost that
grows with the square of the connections."""

from __future__ import annotations

import random

import httpcore
import httpx

from ocrserve.engines.openai_pool import LinearPool, linear_pools
from tests.engines.test_engine_openai import engine_for, make_page

ORIGIN = httpcore.URL("http://a:1/").origin
OTHER = httpcore.URL("http://b:2/").origin


class FakeConnection:
    """A connection in one of httpcore's states; counts the is_idle questions it is asked."""

    def __init__(self, name: str, state: str, origin=ORIGIN, expired: bool = False) -> None:
        self.name, self.state, self.origin, self.expired = name, state, origin, expired
        self.idle_asked = 0

    def is_closed(self) -> bool:
        return self.state == "closed"

    def has_expired(self) -> bool:
        return self.expired and self.state == "idle"

    def is_idle(self) -> bool:
        self.idle_asked += 1
        return self.state == "idle"

    def is_available(self) -> bool:
        return self.state in ("idle", "new")

    def can_handle_request(self, origin) -> bool:
        return origin == self.origin


class FakeRequest:
    def __init__(self, name: str, origin, queued: bool) -> None:
        self.name, self.queued, self.connection = name, queued, None
        self.request = httpcore.Request("GET", f"{origin.scheme.decode()}://{origin.host.decode()}:{origin.port}/")

    def is_queued(self) -> bool:
        return self.connection is None and self.queued

    def assign_to_connection(self, connection) -> None:
        self.connection = connection


def scenario(seed: int, cls: type[httpcore.AsyncConnectionPool]):
    """A pool of `cls` in a random state (the same state for the same seed), its decisions and its end state."""
    rng = random.Random(seed)
    max_conn = rng.randint(1, 12)
    pool = cls(max_connections=max_conn, max_keepalive_connections=rng.randint(0, max_conn))
    made = iter(range(1000))
    pool.create_connection = lambda origin: FakeConnection(f"new{next(made)}", "new", origin)  # type: ignore[method-assign]
    pool._connections = [
        FakeConnection(
            f"c{i}",
            rng.choice(["idle", "idle", "active", "closed"]),
            rng.choice([ORIGIN, ORIGIN, OTHER]),
            expired=rng.random() < 0.2,
        )
        for i in range(rng.randint(0, 14))
    ]
    pool._requests = [
        FakeRequest(f"r{i}", rng.choice([ORIGIN, OTHER]), rng.random() < 0.7) for i in range(rng.randint(0, 8))
    ]
    closing = pool._assign_requests_to_connections()
    return (
        [c.name for c in closing],
        [c.name for c in pool._connections],
        [(r.name, r.connection.name if r.connection else None) for r in pool._requests],
    )


def test_same_decisions_as_httpcore():
    """Closed, expired and surplus idle connections dropped, requests assigned, connections made or replaced:
    the same as httpcore's own pool, in the same order, over many random pools."""
    for seed in range(3000):
        assert scenario(seed, LinearPool) == scenario(seed, httpcore.AsyncConnectionPool), seed


def test_idle_connections_counted_once_not_once_each():
    """httpcore asks every connection is_idle once per idle connection (a square of 60 here); the pool
    asks each a few times at most."""
    n = 60
    pool = LinearPool(max_connections=n + 4, max_keepalive_connections=n + 4)
    pool._connections = [FakeConnection(f"c{i}", "idle") for i in range(n)]
    pool._requests = [FakeRequest("r", ORIGIN, True)]
    pool._assign_requests_to_connections()
    assert max(c.idle_asked for c in pool._connections) <= 2
    assert pool._requests[0].connection is pool._connections[0]


async def test_engine_client_uses_it_and_keeps_connections(standin):
    """The engine's client runs on LinearPool; sequential pages share one kept-alive connection, which the
    pool sees as not closed by the server (the socket polled directly)."""
    eng = engine_for(standin)
    try:
        for i in range(3):
            assert (await eng.ocr(make_page(i))).ok
        pool = eng._session_now().client._transport._pool  # type: ignore[attr-defined]
        assert type(pool) is LinearPool
        assert len(pool._connections) == 1
        stream = pool._connections[0]._connection._network_stream
        assert stream.get_extra_info("is_readable") is False
        assert stream.get_extra_info("socket") is not None
    finally:
        await eng.aclose()


async def test_proxy_and_foreign_transports_left_alone():
    """A client whose own transport is not httpcore's plain pool (here a mock transport) is not touched."""
    client = httpx.AsyncClient(transport=httpx.MockTransport(lambda r: httpx.Response(200)))
    try:
        assert linear_pools(client) is False
    finally:
        await client.aclose()
    plain = httpx.AsyncClient()
    try:
        assert linear_pools(plain) is True
        assert type(plain._transport._pool) is LinearPool  # type: ignore[attr-defined]
    finally:
        await plain.aclose()
