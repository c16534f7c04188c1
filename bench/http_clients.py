"""Client CPU a request of three asyncio HTTP clients against the stand-in server: httpx (httpcore 1.x, what
the openai engine uses), httpx2 (pydantic's successor, the same API; here a dependency of openai, mcp and
huggingface_hub) and aiohttp (when installed). Each request is a chat body of a 384 KB page's base64 (~512 KB)
and reads the stand-in's whole JSON answer, `--concurrency` truly in flight (the stand-in answers at once),
clients interleaved round by round; the CPU is this process's (all threads) a request.

    python -m bench.http_clients --requests 384 --concurrency 16 --rounds 4
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import os
import platform
import statistics
import sys
import time
from collections.abc import Awaitable, Callable

import httpx
import httpx2

from ocrserve.profiles import PROFILES
from tests.fakes.standin import start_standin


def _bodies(n: int) -> list[bytes]:
    img = base64.b64encode(os.urandom(384 * 1024)).decode()
    return [
        json.dumps(
            {
                "model": "x",
                "max_tokens": 1024,
                "messages": [
                    {
                        "role": "user",
                        "content": [
                            {
                                "type": "image_url",
                                "image_url": {"url": "data:image/png;base64," + img[:-8] + f"{i:08d}"},
                            },
                            {"type": "text", "text": "ocr"},
                        ],
                    }
                ],
            }
        ).encode()
        for i in range(n)
    ]


def _httpx_like(mod) -> Callable[[str, list[bytes], int], Awaitable[None]]:
    async def run(url: str, bodies: list[bytes], conc: int) -> None:
        async with mod.AsyncClient(timeout=60, limits=mod.Limits(max_connections=conc)) as cl:
            sem = asyncio.Semaphore(conc)

            async def one(b: bytes) -> None:
                async with sem, cl.stream("POST", url, content=b, headers={"content-type": "application/json"}) as r:
                    data = bytearray()
                    async for ch in r.aiter_bytes():
                        data += ch
                    json.loads(bytes(data))

            await asyncio.gather(*(one(b) for b in bodies))

    return run


async def _aiohttp(url: str, bodies: list[bytes], conc: int) -> None:
    import aiohttp

    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=conc)) as s:
        sem = asyncio.Semaphore(conc)

        async def one(b: bytes) -> None:
            async with sem, s.post(url, data=b, headers={"content-type": "application/json"}) as r:
                data = bytearray()
                async for ch in r.content.iter_any():
                    data += ch
                json.loads(bytes(data))

        await asyncio.gather(*(one(b) for b in bodies))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=384)
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--rounds", type=int, default=4)
    a = ap.parse_args()
    clients: dict[str, Callable[[str, list[bytes], int], Awaitable[None]]] = {
        f"httpx {httpx.__version__}": _httpx_like(httpx),
        f"httpx2 {httpx2.__version__}": _httpx_like(httpx2),
    }
    try:
        import aiohttp

        clients[f"aiohttp {aiohttp.__version__}"] = _aiohttp
    except ImportError:
        pass
    bodies = _bodies(a.requests)
    res: dict[str, list[float]] = {}
    with start_standin(root=PROFILES["chandra-2"].checkpoint) as s:
        url = s.url + "/chat/completions"
        for _ in range(a.rounds):
            for name, run in clients.items():
                t = time.process_time()
                asyncio.run(run(url, bodies, a.concurrency))
                res.setdefault(name, []).append(round(1000 * (time.process_time() - t) / a.requests, 3))
    print(
        json.dumps(
            {
                "command": "python -m bench.http_clients " + " ".join(sys.argv[1:]),
                "machine": {
                    "platform": platform.platform(),
                    "cpu_count": os.cpu_count(),
                    "python": platform.python_version(),
                },
                "ms_per_request": res,
                "median": {k: statistics.median(v) for k, v in res.items()},
            }
        )
    )


if __name__ == "__main__":
    main()
