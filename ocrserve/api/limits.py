"""Request limits: upload size (413, enforced while the body arrives) and per-key concurrency (429)."""

from __future__ import annotations

import json
from collections import defaultdict
from contextlib import contextmanager
from typing import Iterator

from fastapi import HTTPException


class TooManyRequests(HTTPException):
    def __init__(self, detail: str, retry_after: int) -> None:
        super().__init__(429, detail, headers={"Retry-After": str(max(1, int(retry_after)))})


class KeyLimiter:
    """At most `limit` requests at once per key (single event loop: plain counters suffice)."""

    def __init__(self, limit: int, retry_after: int) -> None:
        self.limit = max(1, int(limit))
        self.retry_after = retry_after
        self.active: dict[str, int] = defaultdict(int)

    def acquire(self, key: str) -> None:
        if self.active[key] >= self.limit:
            raise TooManyRequests(
                f"too many conversions running for this key ({self.limit} at once); retry later", self.retry_after
            )
        self.active[key] += 1

    def release(self, key: str) -> None:
        self.active[key] -= 1
        if self.active[key] <= 0:
            del self.active[key]

    @contextmanager
    def slot(self, key: str) -> Iterator[None]:
        self.acquire(key)
        try:
            yield
        finally:
            self.release(key)


class _BodyTooLarge(Exception):
    pass


class BodyLimit:
    """ASGI middleware: a request body over `limit` bytes on `paths` is refused with 413.

    A declared Content-Length over the limit is refused before anything is read; a chunked body is
    counted as it arrives and refused as soon as it passes the limit.
    """

    def __init__(self, app, limit: int, paths: tuple[str, ...], on_reject=None) -> None:
        self.app, self.limit, self.paths, self.on_reject = app, int(limit), paths, on_reject

    async def _reject(self, send) -> None:
        if self.on_reject:
            self.on_reject()
        body = json.dumps({"detail": f"upload too large: the limit is {self.limit} bytes"}).encode()
        await send({"type": "http.response.start", "status": 413, "headers": [
            (b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
            (b"connection", b"close")]})
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
                    raise _BodyTooLarge()
            return msg

        async def tracked_send(msg):
            nonlocal started
            if msg["type"] == "http.response.start":
                started = True
            await send(msg)

        try:
            await self.app(scope, counted_receive, tracked_send)
        except _BodyTooLarge:
            if not started:
                await self._reject(send)
