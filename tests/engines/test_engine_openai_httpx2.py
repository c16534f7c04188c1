"""Engine `openai`'s HTTP library: httpx2 (ocrserve/engines/http.py), its errors caught as httpx's were."""

from __future__ import annotations

import io
import socket

from PIL import Image

from ocrserve.engines.base import PageInput
from ocrserve.engines.openai import OpenAIEngine


def _page(i: int) -> PageInput:
    im = Image.new("RGB", (64, 96), (250, 250, 250))
    im.putpixel((i % 64, 5), (0, 0, 0))  # distinct bytes: a distinct page at the server
    buf = io.BytesIO()
    im.save(buf, format="PNG")
    return PageInput(doc_id="doc", index=i, png=buf.getvalue(), width=64, height=96, unit="px")


async def test_the_engine_speaks_through_httpx2(standin):
    """The page requests go through httpx2's client (engines/http.py; httpx 0.x's pool costs the client
    CPU that grows with the requests in flight), and the engine's error handling catches httpx2's errors:
    a page answered, then a refused connection that is retried and reported, not raised."""
    import httpx2

    eng = OpenAIEngine("chandra-1", server=standin.url, backoff_s=0.01)
    try:
        res = await eng.ocr(_page(71))
        assert res.ok
        assert isinstance(eng._session_now().client, httpx2.AsyncClient)
    finally:
        await eng.aclose()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    eng = OpenAIEngine("chandra-1", server=f"127.0.0.1:{port}", backoff_s=0.01)
    try:
        res = await eng.ocr(_page(72))
    finally:
        await eng.aclose()
    assert not res.ok and "ConnectError" in res.error
