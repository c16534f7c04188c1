"""Engine `openai`'s HTTP library: httpx2 (ocrserve/engines/http.py), its errors caught as httpx's were."""

from __future__ import annotations

import socket

from ocrserve.engines.openai import OpenAIEngine
from tests.engines.test_engine_openai import engine_for, make_page, run_one


async def test_the_engine_speaks_through_httpx2(standin):
    """The page requests go through httpx2's client (engines/http.py; httpx 0.x's pool costs the client
    CPU that grows with the requests in flight), and the engine's error handling catches httpx2's errors:
    a page answered, then a refused connection that is retried and reported, not raised."""
    import httpx2

    eng = engine_for(standin)
    try:
        res = await eng.ocr(make_page(71))
        assert res.ok
        assert isinstance(eng._session_now().client, httpx2.AsyncClient)
    finally:
        await eng.aclose()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    res = await run_one(OpenAIEngine("chandra-1", server=f"127.0.0.1:{port}", backoff_s=0.01), make_page(72))
    assert not res.ok and "ConnectError" in res.error
