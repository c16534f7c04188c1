"""One OpenAI-compatible endpoint in front of the vLLM replicas of `ocrserve serve` (a replica per GPU).

    python -m ocrserve.vllm.router --port 8000 --replicas http://127.0.0.1:8001,http://127.0.0.1:8002

Routes
- Every request but the three below (POST /v1/chat/completions and /v1/completions, GET /v1/models,
  /tokenize, ...) goes to the healthy replica with the fewest requests outstanding through this router
  (ties rotate, so requests sent one at a time spread too) and its answer comes back as it arrives:
  status, headers and body bytes unchanged, a `stream: true` answer event by event (SSE passthrough).
- GET /health: 200 while at least one replica is healthy, else 503.
- GET /metrics: every healthy replica's Prometheus page merged into one, each sample labelled
  `replica="i"` (one HELP/TYPE per family, so the page stays valid; summing over `replica` gives the
  totals, which is what ocrserve's bench does with every label set), then the router's own
  `ocrserve_router_*` gauges and counters (in rotation, outstanding, requests and retries per replica).
- GET /router/replicas: each replica's state as JSON.

Failures
- Every `health_interval` seconds (2) each replica's GET /health is asked: 200 puts it in rotation,
  anything else (refused, timeout, a 5xx) takes it out. A replica that `ocrserve serve` restarted is
  back in rotation at the first check after it is healthy.
- A request whose replica cannot be reached, or whose connection fails before any answer came back
  (refused, reset, closed without a response: a replica that died), takes that replica out at once
  and goes to another one; the client sees nothing of it (reading a page twice is harmless). Once the
  answer's status line has gone to the client, a failure mid-answer closes the client's connection,
  as the dead replica's would have (ocrserve's openai engine retries such a page).
- A 5xx answer is passed through (vLLM's own error; the client's retry policy applies) and that
  replica's health is checked at once. No healthy replica: 503 with Retry-After: 1.
- A client that disconnects: its upstream request is closed, so vLLM aborts it and frees the slot.

Why a router and not vLLM's own data parallelism (`--data-parallel-size`, still `serve --dp-backend vllm`):
- Preprocessing. With vLLM's internal load balancing one API server process receives every request
  and turns it into model inputs for all N engines; vLLM's data-parallel guide says that process "can
  become a bottleneck" at larger sizes. For this model it already is one for ONE GPU: on an H200 the
  API server's image preprocessing capped vision + prefill at 4.9 pages/s with one renderer thread (6.8
  with 8: bench/results/gpu-h200/sweep-2026-12-03c), and the preprocessing is GIL-bound per process
  (vLLM issue #58266: a wider thread pool stops helping at about 2 threads). N GPUs behind one API
  server would share what one GPU needs; a replica per GPU brings its own API server, so the
  preprocessing scales with the GPUs.
- `--api-server-count` scales that front end out, but with internal load balancing there is no
  one-to-one API server / engine pairing, so vLLM turns its multimodal IPC cache off (vLLM PRs #22198,
  #23717): the cache that makes a retried page's preprocessing a lookup.
- Failures. Under internal DP the front end shuts every engine down when one dies (vLLM RFC #30112), so
  one GPU fault restarts all N (each minutes of loading and compiling). Here the supervisor restarts
  the dead replica alone while this router sends its pages to the others.
- Chandra is a dense model: its replicas need no collectives (vLLM's guide: external load balancing
  "can already be done trivially for non-MoE models, since each deployed server is fully independent").
The price is one local hop: on the CPU about 2.5 ms of router time a whole-page request (1.4 MB body) and
about 50 µs a streamed event (bench/results/router-overhead-cpu/), so pages sent whole cost next to
nothing, while 8 GPUs all streaming token by token would outrun this one process.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import time
from dataclasses import dataclass, field

from ocrserve.engines.http import httpx  # httpx2: with many pages in flight httpx 0.x walks its pool per request
from ocrserve.vllm.router_metrics import merge_metrics

log = logging.getLogger("ocrserve.router")

# hop-by-hop headers, and those httpx / uvicorn set themselves
_HOP_BY_HOP = {b"connection", b"keep-alive", b"te", b"trailer", b"transfer-encoding", b"upgrade"}
_DROP_REQUEST = _HOP_BY_HOP | {b"host", b"proxy-authorization", b"proxy-connection", b"content-length"}
_DROP_RESPONSE = _HOP_BY_HOP | {b"proxy-authenticate"}


@dataclass
class Replica:
    index: int
    url: str
    healthy: bool = False
    outstanding: int = 0  # requests through the router not yet answered in full
    requests: int = 0  # sent to it
    failures: int = 0  # could not reach it (moved to another replica)
    reason: str = "not checked yet"
    since: float = field(default_factory=time.time)


class Router:
    """The ASGI application: least outstanding requests over the replicas, health checks in the background."""

    def __init__(
        self,
        urls: list[str],
        *,
        health_interval: float = 2.0,
        health_timeout: float = 5.0,
        connect_timeout: float = 5.0,
    ) -> None:
        if not urls:
            raise ValueError("the router needs at least one replica URL")
        self.replicas = [Replica(i, u.rstrip("/")) for i, u in enumerate(urls)]
        self.health_interval, self.health_timeout = health_interval, health_timeout
        # an answer arrives when the page is done (or token by token): no read deadline here, the client keeps its own
        self.timeout = httpx.Timeout(connect=connect_timeout, read=None, write=60.0, pool=None)
        self.retries = 0
        self._turn = 0
        self._client: httpx.AsyncClient | None = None
        self._tasks: set[asyncio.Task] = set()

    # ------------------------------------------------------------------------------- choosing
    def pick(self, tried: set[int]) -> Replica | None:
        """The healthy replica not yet tried with the fewest outstanding requests; ties go round robin."""
        live = [r for r in self.replicas if r.healthy and r.index not in tried]
        if not live:
            return None
        n, start = len(self.replicas), self._turn
        self._turn = (self._turn + 1) % n
        return min(live, key=lambda r: (r.outstanding, (r.index - start) % n))

    def _mark(self, r: Replica, healthy: bool, reason: str) -> None:
        if healthy != r.healthy:
            log.warning(
                "replica %d (%s) %s%s",
                r.index,
                r.url,
                "back in rotation" if healthy else "out of rotation",
                "" if healthy else f": {reason}",
            )
            r.since = time.time()
        r.healthy, r.reason = healthy, reason

    # ------------------------------------------------------------------------------- health
    async def check(self, r: Replica) -> None:
        try:
            resp = await self.client.get(f"{r.url}/health", timeout=self.health_timeout)
            self._mark(r, resp.status_code == 200, f"/health answered {resp.status_code}")
        except httpx.HTTPError as e:
            self._mark(r, False, f"/health: {type(e).__name__} {e}".strip())

    async def check_all(self) -> None:
        await asyncio.gather(*(self.check(r) for r in self.replicas))

    def check_soon(self, r: Replica) -> None:
        task = asyncio.get_running_loop().create_task(self.check(r))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _health_loop(self) -> None:
        while True:
            await asyncio.sleep(self.health_interval)
            await self.check_all()

    @property
    def client(self) -> httpx.AsyncClient:
        if self._client is None:
            self._client = httpx.AsyncClient(
                timeout=self.timeout,
                limits=httpx.Limits(max_connections=None, max_keepalive_connections=1024, keepalive_expiry=30.0),
            )
        return self._client

    async def startup(self) -> None:
        await self.check_all()
        task = asyncio.get_running_loop().create_task(self._health_loop())
        self._tasks.add(task)

    async def shutdown(self) -> None:
        for t in list(self._tasks):
            t.cancel()
        if self._client is not None:
            await self._client.aclose()

    # ------------------------------------------------------------------------------- ASGI
    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] == "lifespan":
            while True:
                msg = await receive()
                if msg["type"] == "lifespan.startup":
                    await self.startup()
                    await send({"type": "lifespan.startup.complete"})
                elif msg["type"] == "lifespan.shutdown":
                    await self.shutdown()
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        if scope["type"] != "http":
            return
        method, path = scope["method"], scope["path"]
        if method in ("GET", "HEAD") and path == "/health":
            ok = any(r.healthy for r in self.replicas)
            await respond(send, 200 if ok else 503, b"" if ok else b"no healthy replica\n", "text/plain")
        elif method == "GET" and path == "/metrics":
            await respond(send, 200, (await self.metrics()).encode(), "text/plain; version=0.0.4; charset=utf-8")
        elif method == "GET" and path == "/router/replicas":
            await respond(send, 200, json.dumps(self.status()).encode())
        else:
            await self.forward(scope, receive, send)

    def status(self) -> dict:
        return {
            "replicas": [vars(r) for r in self.replicas],
            "retries": self.retries,
            "healthy": sum(r.healthy for r in self.replicas),
        }

    async def forward(self, scope, receive, send) -> None:
        """Proxy one request; a client that disconnects cancels it (closing the upstream request)."""
        body = await read_body(receive)
        if body is None:
            return
        target = scope.get("raw_path") or scope["path"].encode()
        if scope.get("query_string"):
            target += b"?" + scope["query_string"]
        headers = [(k, v) for k, v in scope["headers"] if k.lower() not in _DROP_REQUEST]
        proxy = asyncio.ensure_future(self._proxy(scope["method"], target.decode("latin-1"), headers, body, send))
        gone = asyncio.ensure_future(_disconnected(receive))
        try:
            await asyncio.wait({proxy, gone}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            gone.cancel()
            if not proxy.done():
                proxy.cancel()
            results = await asyncio.gather(proxy, gone, return_exceptions=True)
        if isinstance(results[0], Exception):  # a client gone mid-answer, or a fault of ours: logged, not raised
            log.warning("request %s %s ended early: %r", scope["method"], scope["path"], results[0])

    async def _proxy(self, method: str, target: str, headers: list, body: bytes, send) -> None:
        tried: set[int] = set()
        while True:
            r = self.pick(tried)
            if r is None:
                msg = {
                    "error": {
                        "message": "no healthy vLLM replica behind the router",
                        "type": "ServiceUnavailable",
                        "code": 503,
                    }
                }
                await respond(send, 503, json.dumps(msg).encode(), headers={"retry-after": "1"})
                return
            tried.add(r.index)
            r.outstanding += 1
            r.requests += 1
            try:
                request = self.client.build_request(method, r.url + target, headers=headers, content=body)
                try:
                    resp = await self.client.send(request, stream=True)
                except httpx.TransportError as e:  # nothing came back: the replica is gone, another takes it
                    r.failures += 1
                    self.retries += 1
                    self._mark(r, False, f"{type(e).__name__} {e}".strip())
                    continue
                try:
                    await self._relay(r, resp, send)
                finally:
                    await resp.aclose()
                return
            finally:
                r.outstanding -= 1

    async def _relay(self, r: Replica, resp: httpx.Response, send) -> None:
        if resp.status_code >= 500:
            self.check_soon(r)
        hdrs = [(k, v) for k, v in resp.headers.raw if k.lower() not in _DROP_RESPONSE]
        await send({"type": "http.response.start", "status": resp.status_code, "headers": hdrs})
        try:
            async for chunk in resp.aiter_raw():
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
        except httpx.TransportError as e:
            # the answer broke off: the client's connection is closed unfinished (uvicorn does so when
            # the app returns without ending the body), as the replica's own would have been
            log.warning("replica %d broke off an answer: %s %s", r.index, type(e).__name__, e)
            self.check_soon(r)
            return
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    # ------------------------------------------------------------------------------- metrics
    async def metrics(self) -> str:
        async def page(r: Replica) -> tuple[int, str]:
            try:
                resp = await self.client.get(f"{r.url}/metrics", timeout=self.health_timeout)
                return r.index, resp.text if resp.status_code == 200 else ""
            except httpx.HTTPError:
                return r.index, ""

        pages = await asyncio.gather(*(page(r) for r in self.replicas if r.healthy))
        return merge_metrics(list(pages)) + self._own_metrics()

    def _own_metrics(self) -> str:
        rows = [
            (
                "ocrserve_router_replica_healthy",
                "gauge",
                "1 while the replica is in the router's rotation",
                lambda r: int(r.healthy),
            ),
            (
                "ocrserve_router_replica_outstanding",
                "gauge",
                "requests sent through the router not yet answered",
                lambda r: r.outstanding,
            ),
            (
                "ocrserve_router_requests_total",
                "counter",
                "requests the router sent to the replica",
                lambda r: r.requests,
            ),
            (
                "ocrserve_router_unreachable_total",
                "counter",
                "requests that could not reach the replica and went to another",
                lambda r: r.failures,
            ),
        ]
        out = []
        for name, kind, text, value in rows:
            out += [f"# HELP {name} {text}", f"# TYPE {name} {kind}"]
            out += [f'{name}{{replica="{r.index}",url="{r.url}"}} {value(r)}' for r in self.replicas]
        return "\n".join(out) + "\n"


async def read_body(receive) -> bytes | None:
    """The whole request body, or None when the client left first."""
    parts = []
    while True:
        msg = await receive()
        if msg["type"] == "http.disconnect":
            return None
        parts.append(msg.get("body", b""))
        if not msg.get("more_body"):
            return b"".join(parts)


async def _disconnected(receive) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass


async def respond(
    send, status: int, body: bytes, content_type: str = "application/json", headers: dict[str, str] | None = None
) -> None:
    hdrs = [(b"content-type", content_type.encode()), (b"content-length", str(len(body)).encode())]
    hdrs += [(k.encode(), v.encode()) for k, v in (headers or {}).items()]
    await send({"type": "http.response.start", "status": status, "headers": hdrs})
    await send({"type": "http.response.body", "body": body})


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m ocrserve.vllm.router", description=__doc__.splitlines()[0])
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=8000)
    ap.add_argument("--replicas", required=True, help="comma-separated base URLs of the vLLM servers (no /v1)")
    ap.add_argument("--health-interval", type=float, default=2.0, help="seconds between health checks of each replica")
    ap.add_argument("--health-timeout", type=float, default=5.0, help="seconds a replica's /health may take")
    a = ap.parse_args(argv)
    import uvicorn

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    for name in ("httpx", "httpx2"):
        logging.getLogger(name).setLevel(logging.WARNING)  # not a line per request
    router = Router(
        [u.strip() for u in a.replicas.split(",") if u.strip()],
        health_interval=a.health_interval,
        health_timeout=a.health_timeout,
    )
    # the replicas' own Server and Date headers pass through; no limit on connections (the replicas queue)
    uvicorn.run(
        router,
        host=a.host,
        port=a.port,
        log_level="warning",
        access_log=False,
        lifespan="on",
        server_header=False,
        date_header=False,
        backlog=4096,
        timeout_keep_alive=75,
    )


if __name__ == "__main__":
    main()
