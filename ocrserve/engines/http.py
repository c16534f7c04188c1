"""The HTTP library the page requests go through: httpx2 ("the next generation HTTP client": httpx's API,
by httpx's author, github.com/pydantic/httpx2), httpx where it is not installed.

With a vLLM server's 128 pages in flight, httpx 0.x's connection pool (httpcore 1) walks its connection list
once for every idle connection on each request: at 64 truly in flight that is 12.5 ms of client CPU a
request against httpx2's 1.8 (bench/results/http-clients-2026-12-07/), and the pipeline's parent process
spent 17 ms a page against a GPU-paced server with 128 in flight where it spends 10-11 on httpx2
(bench/results/client-http2x-2026-12-07/). The engine's client and the router of `ocrserve serve` (14-18 ->
5-6 ms a request paced on a loaded 2-core VM, 4.3 -> 3.4 on the GPU host:
bench/results/router-http2x-2026-12-07/, client-b64-2026-12-07/) are on it; the rest of ocrserve (the API's
tests, the bench's plain client) keeps httpx.
"""

from __future__ import annotations

try:
    import httpx2 as httpx
except ImportError:  # pragma: no cover - httpx2 is a dependency; a trimmed install falls back
    import httpx  # type: ignore[no-redef]

__all__ = ["httpx"]
