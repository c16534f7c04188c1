"""The openai engine's HTTP side: the server URL, the server's answers (JSON or an SSE stream) and
its errors, sorted into the ones a retry may fix (`Retry`) and the ones it does not (`Fatal`)."""

from __future__ import annotations

import email.utils
import json
import time
from dataclasses import dataclass

import httpx

from ocrserve.engines.base import EngineError
from ocrserve.engines.deltas import Deltas

RETRYABLE_STATUS = {408, 409, 425, 429}


def normalize_base_url(server: str) -> str:
    """`host:8000`, `http://host:8000`, `.../v1`, `.../v1/chat/completions` -> `http://host:8000/v1`."""
    s = (server or "").strip()
    if not s:
        raise EngineError("the openai engine needs a server URL (--server or OCRSERVE_SERVER)")
    if "://" not in s:
        s = "http://" + s
    try:
        url = httpx.URL(s)
    except Exception as e:  # noqa: BLE001 - httpx.InvalidURL and the ValueErrors/TypeErrors of odd input
        raise EngineError(f"server URL {server!r} is not a valid URL: {e}") from None
    if url.scheme not in ("http", "https") or not url.host:
        raise EngineError(f"server URL {server!r} must be http(s)://host[:port][/v1]")
    path = url.path.rstrip("/")
    for suffix in ("/chat/completions", "/completions", "/models"):
        if path.endswith("/v1" + suffix):
            path = path[: -len(suffix)]
    if not path.endswith("/v1"):
        path += "/v1"
    return str(url.copy_with(path=path, query=None, fragment=None)).rstrip("/")


def parse_retry_after(value: str | None) -> float | None:
    """Seconds to wait from a Retry-After header (seconds or an HTTP date), or None."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def png_size(data: bytes) -> tuple[int, int] | None:
    """Width and height from a PNG header (no decode)."""
    if data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) >= 24:
        return int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
    return None


class Retry(Exception):
    """A failure a retry may fix (connection, timeout, 5xx, 429)."""

    def __init__(self, reason: str, retry_after: float | None = None):
        super().__init__(reason)
        self.reason, self.retry_after = reason, retry_after


class Fatal(Exception):
    """A failure no retry fixes (4xx)."""

    def __init__(self, reason: str, status: int | None = None, message: str = ""):
        super().__init__(reason)
        self.reason, self.status, self.message = reason, status, message


@dataclass
class Answer:
    content: str
    finish_reason: str | None
    prompt_tokens: int | None
    completion_tokens: int | None


def error_message(r: httpx.Response) -> str:
    """The server's error text: OpenAI `{"error": {"message"}}`, vLLM's older `{"message"}`, or the body."""
    try:
        data = json.loads(r.content)
    except ValueError:
        return r.text[:300].strip()
    if isinstance(data, dict):
        err = data.get("error")
        if isinstance(err, dict) and err.get("message"):
            return str(err["message"])
        if isinstance(err, str):
            return err
        for key in ("message", "detail"):
            if data.get(key):
                return str(data[key])
    return r.text[:300].strip()


def check_status(r: httpx.Response) -> None:
    if r.status_code == 200:
        return
    msg = error_message(r)
    if r.status_code >= 500 or r.status_code in RETRYABLE_STATUS:
        raise Retry(f"HTTP {r.status_code}: {msg}", parse_retry_after(r.headers.get("retry-after")))
    hint = " (check --api-key)" if r.status_code in (401, 403) else ""
    raise Fatal(f"server refused the request: HTTP {r.status_code}{hint}: {msg}", r.status_code, msg)


def parse_json(r: httpx.Response) -> Answer:
    try:
        data = json.loads(r.content)
        choice = data["choices"][0]
        content = choice["message"].get("content") or ""
        usage = data.get("usage") or {}
    except (ValueError, KeyError, IndexError, TypeError, AttributeError):
        raise Retry(f"malformed answer from the server: {r.text[:200]!r}") from None
    return Answer(content, choice.get("finish_reason"), usage.get("prompt_tokens"), usage.get("completion_tokens"))


async def parse_sse(r: httpx.Response, on_delta: Deltas | None) -> Answer:
    parts: list[str] = []
    finish: str | None = None
    usage: dict = {}
    done = False
    async for line in r.aiter_lines():
        if not line.startswith("data:"):
            continue
        data = line[5:].strip()
        if data == "[DONE]":
            done = True
            break
        try:
            chunk = json.loads(data)
        except ValueError:
            raise Retry(f"malformed event in the stream: {data[:200]!r}") from None
        if chunk.get("error"):
            err = chunk["error"]
            raise Retry(f"error in the stream: {err.get('message') if isinstance(err, dict) else err}")
        for choice in chunk.get("choices") or ():
            piece = (choice.get("delta") or {}).get("content")
            if piece:
                parts.append(piece)
                if on_delta is not None:
                    await on_delta.send(piece)
            if choice.get("finish_reason"):
                finish = choice["finish_reason"]
        if chunk.get("usage"):
            usage = chunk["usage"]
    if not done and finish is None:
        raise Retry("the stream ended before the answer was complete")
    return Answer("".join(parts), finish, usage.get("prompt_tokens"), usage.get("completion_tokens"))
