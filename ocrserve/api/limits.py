"""Request limits: upload size (413, enforced while the body arrives), per-key concurrency (429), and
requests whose framing is ambiguous (400, the connection closed)."""

from __future__ import annotations

import json
from collections import defaultdict

from ocrserve.api.errors import Busy, TooLarge
from ocrserve.vllm.router import respond


class KeyLimiter:
    """At most `limit` requests at once per key (single event loop: plain counters suffice)."""

    def __init__(self, limit: int, retry_after: int) -> None:
        self.limit = max(1, int(limit))
        self.retry_after = retry_after
        self.active: dict[str, int] = defaultdict(int)

    def acquire(self, key: str) -> None:
        if self.active[key] >= self.limit:
            raise Busy(
                f"too many conversions running for this key ({self.limit} at once); retry later", self.retry_after
            )
        self.active[key] += 1

    def release(self, key: str) -> None:
        self.active[key] -= 1
        if self.active[key] <= 0:
            del self.active[key]


def too_large(limit: int) -> TooLarge:
    return TooLarge(f"upload too large: the limit is {limit} bytes")


class BodyLimit:
    """ASGI middleware: a request body over `limit` bytes on `paths` is refused with 413.

    A declared Content-Length over the limit is refused before anything is read; a body without one
    (`Transfer-Encoding: chunked`) is counted as it arrives: the receive that passes the limit raises
    `TooLarge`, which the app answers with 413 and its reason (the upload reader lets it through, also
    from inside a multipart parse); if it escapes the app before a response started, 413 is sent here.
    """

    def __init__(self, app, limit: int, paths: tuple[str, ...], on_reject=None) -> None:
        self.app, self.limit, self.paths, self.on_reject = app, int(limit), paths, on_reject

    async def _reject(self, send) -> None:
        if self.on_reject:
            self.on_reject()
        err = too_large(self.limit)
        body = json.dumps({"detail": err.detail, "code": err.code}).encode()
        await respond(send, 413, body, headers={"connection": "close"})

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or scope["method"] != "POST" or not scope["path"].startswith(self.paths):
            return await self.app(scope, receive, send)
        declared = dict(scope["headers"]).get(b"content-length")
        # room for multipart framing / base64 on top of the file itself
        allowed = self.limit * 4 // 3 + 64 * 1024
        if declared is not None and declared.isdigit() and int(declared) > allowed:
            return await self._reject(send)
        seen = 0
        started = False

        async def counted_receive():
            nonlocal seen
            msg = await receive()
            if msg["type"] == "http.request":
                seen += len(msg.get("body", b""))
                if seen > allowed:
                    raise too_large(self.limit)
            return msg

        async def tracked_send(msg):
            nonlocal started
            if msg["type"] == "http.response.start":
                started = True
            await send(msg)

        try:
            await self.app(scope, counted_receive, tracked_send)
        except TooLarge:
            if not started:
                await self._reject(send)


class FramingGuard:
    """ASGI middleware: a request with both Content-Length and Transfer-Encoding (or two different
    Content-Lengths) is answered 400 with `Connection: close`, unread, and the server closes the
    connection after it: RFC 9112 6.1 and 6.3 (a proxy in front may have framed it the other way, so
    what follows on the connection could be a smuggled request). uvicorn's h11 serves such a request,
    chunked, and keeps the connection; its httptools parser (llhttp) refuses it itself."""

    def __init__(self, app) -> None:
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http":
            names = [k.lower() for k, _ in scope["headers"]]
            lengths = {v.strip() for k, v in scope["headers"] if k.lower() == b"content-length"}
            if (b"content-length" in names and b"transfer-encoding" in names) or len(lengths) > 1:
                body = (
                    json.dumps(
                        {
                            "detail": "ambiguous request framing: Content-Length with Transfer-Encoding (or "
                            "two Content-Lengths); send one of them",
                            "code": "bad_input",
                        }
                    ).encode()
                    + b"\n"
                )
                headers = [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                    (b"connection", b"close"),
                ]
                await send({"type": "http.response.start", "status": 400, "headers": headers})
                await send({"type": "http.response.body", "body": body})
                return
        await self.app(scope, receive, send)
