"""The openai engine's HTTP side: the server URL, the server's answers (JSON or an SSE stream) and
its errors, sorted into the ones a retry may fix (`Retry`) and the ones it does not (`Fatal`).

An answer is bounded by the max_tokens asked: its text by `answer_cap` (BYTES_PER_TOKEN UTF-8 bytes a
token: a token of Chandra's tokenizer is a few characters, 64 bytes is far more than any), what is
read off the wire by `wire_cap` (room for JSON escapes and an SSE event per token), and the
completion_tokens the server reports by max_tokens itself. An answer past any bound is a `Retry`
(a failed attempt): the reading stops there, so a server that answers without end costs no memory."""

from __future__ import annotations

import email.utils
import json
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass

from ocrserve.engines.base import EngineError
from ocrserve.engines.deltas import Deltas
from ocrserve.engines.http import httpx

RETRYABLE_STATUS = {408, 409, 425, 429}
BYTES_PER_TOKEN = 64  # UTF-8 bytes of answer a token may bring, generously


def answer_cap(max_tokens: int) -> int:
    """The most bytes of text an answer of max_tokens tokens may have."""
    return max_tokens * BYTES_PER_TOKEN


def wire_cap(max_tokens: int) -> int:
    """The most bytes one answer may take on the wire: its text escaped in JSON (a \\uXXXX for a byte at
    worst) or as an SSE event a token (some 200 bytes of JSON around each piece), and some slack."""
    return 16 * answer_cap(max_tokens) + 65536


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
    """A failure a retry may fix (connection, timeout, 5xx, 429, an answer past its bounds). `down`: the
    server did not answer (refused, reset, timed out, a 5xx): what counts toward its circuit breaker."""

    def __init__(self, reason: str, retry_after: float | None = None, *, down: bool = False):
        super().__init__(reason)
        self.reason, self.retry_after, self.down = reason, retry_after, down


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
        after = parse_retry_after(r.headers.get("retry-after"))
        raise Retry(f"HTTP {r.status_code}: {msg}", after, down=r.status_code >= 500)
    hint = " (check --api-key)" if r.status_code in (401, 403) else ""
    raise Fatal(f"server refused the request: HTTP {r.status_code}{hint}: {msg}", r.status_code, msg)


def too_large(max_tokens: int, what: str) -> Retry:
    return Retry(f"the answer is larger than max_tokens={max_tokens} allows ({what}): a misbehaving server")


def check_answer(ans: Answer, max_tokens: int) -> Answer:
    """The answer if it is within what max_tokens allows, else Retry."""
    if len(ans.content) > answer_cap(max_tokens) // 4 and len(ans.content.encode("utf-8")) > answer_cap(max_tokens):
        raise too_large(max_tokens, f"more than {answer_cap(max_tokens):,} bytes of text")
    if isinstance(ans.completion_tokens, int) and ans.completion_tokens > max_tokens:
        raise Retry(
            f"the server reported {ans.completion_tokens} completion tokens, more than max_tokens={max_tokens}: "
            "a misbehaving server"
        )
    return ans


async def _chunks(r: httpx.Response, max_tokens: int) -> AsyncIterator[bytes]:
    """The answer's bytes as they come, until more than wire_cap(max_tokens) came (then Retry)."""
    limit, seen = wire_cap(max_tokens), 0
    async for chunk in r.aiter_bytes():
        seen += len(chunk)
        if seen > limit:
            raise too_large(max_tokens, f"more than {limit:,} bytes sent")
        yield chunk


async def read_json(r: httpx.Response, max_tokens: int) -> Answer:
    """A whole (non-streamed) answer, read up to its bound."""
    body = bytearray()
    async for chunk in _chunks(r, max_tokens):
        body += chunk
    return check_answer(parse_json(bytes(body)), max_tokens)


def parse_json(content: bytes) -> Answer:
    try:
        data = json.loads(content)
        choice = data["choices"][0]
        text = choice["message"].get("content") or ""
        usage = data.get("usage") or {}
    except (ValueError, KeyError, IndexError, TypeError, AttributeError):
        raise Retry(f"malformed answer from the server: {content[:200]!r}") from None
    return Answer(text, choice.get("finish_reason"), usage.get("prompt_tokens"), usage.get("completion_tokens"))


async def _lines(r: httpx.Response, max_tokens: int) -> AsyncIterator[str]:
    """The stream's lines, read up to the answer's bound (a line without end included)."""
    buf = bytearray()
    async for chunk in _chunks(r, max_tokens):
        start = len(buf)
        buf += chunk
        cut = buf.rfind(b"\n", start)
        if cut < 0:
            continue
        for line in bytes(buf[:cut]).split(b"\n"):
            yield line.rstrip(b"\r").decode("utf-8", "replace")
        del buf[: cut + 1]
    if buf:
        yield bytes(buf).rstrip(b"\r").decode("utf-8", "replace")


async def parse_sse(r: httpx.Response, on_delta: Deltas | None, max_tokens: int) -> Answer:
    parts: list[str] = []
    size, cap = 0, answer_cap(max_tokens)
    finish: str | None = None
    usage: dict = {}
    done = False
    async for line in _lines(r, max_tokens):
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
                size += len(piece.encode("utf-8"))
                if size > cap:
                    raise too_large(max_tokens, f"more than {cap:,} bytes of text")
                parts.append(piece)
                if on_delta is not None:
                    await on_delta.send(piece)
            if choice.get("finish_reason"):
                finish = choice["finish_reason"]
        if chunk.get("usage"):
            usage = chunk["usage"]
    if not done and finish is None:
        raise Retry("the stream ended before the answer was complete", down=True)
    ans = Answer("".join(parts), finish, usage.get("prompt_tokens"), usage.get("completion_tokens"))
    return check_answer(ans, max_tokens)
