"""Request limits: upload size (413, enforced while the body arrives) and per-key concurrency (429)."""

from __future__ import annotations

import json
from collections import defaultdict

from ocrserve.api.errors import Busy, TooLarge


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
        await send(
            {
                "type": "http.response.start",
                "status": 413,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                    (b"connection", b"close"),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})

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
