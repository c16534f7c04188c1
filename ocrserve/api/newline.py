"""Every JSON answer of the API ends with a newline (curl's output then does not run into the prompt).

A plain ASGI middleware, so it covers every route alike: the routes' own answers, those FastAPI
serializes itself (a response model goes straight to bytes there, past any response class), errors
(the service's, 404 and 405 for unknown routes, 422 for invalid parameters) and /openapi.json.
Streams are left as they are: NDJSON and Server-Sent Events already end each message with one.
"""

from __future__ import annotations

from typing import Any

_JSON = b"application/json"


def _is_json(headers: list[tuple[bytes, bytes]]) -> bool:
    found = {k.lower(): v for k, v in headers}
    kind = found.get(b"content-type", b"").split(b";", 1)[0].strip().lower()
    return kind == _JSON and b"content-encoding" not in found


class JSONNewline:
    """Appends "\\n" to an application/json body that lacks it (and counts it in Content-Length)."""

    def __init__(self, app) -> None:
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or scope.get("method") == "HEAD":
            return await self.app(scope, receive, send)
        start: dict[str, Any] | None = None
        chunks: list[bytes] = []

        async def wrapped(message: dict[str, Any]) -> None:
            nonlocal start
            if message["type"] == "http.response.start" and _is_json(list(message.get("headers", []))):
                start = message  # held until the whole body is known
                return
            if start is None or message["type"] != "http.response.body":
                return await send(message)
            chunks.append(message.get("body", b""))
            if message.get("more_body", False):
                return
            body = b"".join(chunks)
            if body and not body.endswith(b"\n"):
                body += b"\n"
            headers = [(k, v) for k, v in start.get("headers", []) if k.lower() != b"content-length"]
            headers.append((b"content-length", str(len(body)).encode()))
            held, start = start, None
            await send({**held, "headers": headers})
            await send({"type": "http.response.body", "body": body})

        await self.app(scope, receive, wrapped)
