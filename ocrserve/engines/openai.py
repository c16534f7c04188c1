"""Engine `openai`: any OpenAI-compatible chat-completions server; vLLM serving Chandra in production.

One `httpx.AsyncClient` (HTTP/1.1, keep-alive, a connection per request in flight) sends each page
as the model expects it: one user turn, the page PNG as a data URL first, then the profile's prompt
byte for byte, with the profile's sampling. The request body is built by splicing the base64 image
into a JSON template cached per (model, sampling), so the hot path costs one base64 encode and one
copy of the image, not a JSON encode of it.

Retries (the engine owns them; it never raises for a page):
- a repetition loop or an answer cut off at max_tokens -> again with the profile's retry sampling,
  up to `profile.max_retries` times; then ok=False with the last answer in `extra["last_raw"]`;
- connection errors, timeouts, 5xx, 429 and 408 -> exponential backoff with jitter (Retry-After
  honoured), up to `settings.max_connection_retries` times;
- 400 "max_tokens is too large" (vLLM: prompt + max_tokens > max_model_len) -> max_tokens lowered to
  what the server has room for, once; the engine also learns the server's max_model_len and the
  prompt's token overhead so later pages are sized right from the start;
- any other 4xx -> the page fails at once with the server's message.

Streaming (`on_delta` given, or stream=True): each content piece goes to `on_delta` as it arrives.
When an attempt that already delivered pieces is retried, `on_delta("")` is called before the new
attempt's pieces: an empty delta means "discard the text so far, the answer starts over" (a consumer
that only appends is unaffected). The final `EngineResult.raw` is always the authoritative answer.
"""

from __future__ import annotations

import asyncio
import base64
import email.utils
import inspect
import json
import logging
import random
import re
import time
from dataclasses import dataclass
from typing import Any

import httpx

from ocrserve.parse import is_repetition_loop
from ocrserve.profiles import Profile, Sampling, load_profile
from ocrserve.engines.base import DeltaCallback, EngineError, EngineResult, PageInput

log = logging.getLogger(__name__)

DEFAULT_CONCURRENCY = 128        # enough requests in flight to keep a vLLM batch full on one GPU
_IMG_MARK = "__OCRSERVE_IMAGE_BASE64__"
_TOO_LARGE = re.compile(
    r"maximum context length is (\d+) tokens.*?(?:has|contains(?: at least)?) (\d+) input tokens", re.S
)
_KEEPALIVE_S = 4.0               # below uvicorn's (vLLM's) 5 s idle timeout: never reuse a closing socket
_RETRYABLE_STATUS = {408, 409, 425, 429}


def normalize_base_url(server: str) -> str:
    """`host:8000`, `http://host:8000`, `.../v1`, `.../v1/chat/completions` -> `http://host:8000/v1`."""
    s = (server or "").strip()
    if not s:
        raise EngineError("the openai engine needs a server URL (--server or OCRSERVE_SERVER)")
    if "://" not in s:
        s = "http://" + s
    try:
        url = httpx.URL(s)
    except Exception as e:  # httpx.InvalidURL and friends
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


def _image_size(data: bytes) -> tuple[int, int] | None:
    """Width and height from a PNG header (no decode)."""
    if data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) >= 24:
        return int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
    return None


class _Retry(Exception):
    """A failure a retry may fix (connection, timeout, 5xx, 429)."""

    def __init__(self, reason: str, retry_after: float | None = None):
        super().__init__(reason)
        self.reason, self.retry_after = reason, retry_after


class _Fatal(Exception):
    """A failure no retry fixes (4xx)."""

    def __init__(self, reason: str, status: int | None = None, message: str = ""):
        super().__init__(reason)
        self.reason, self.status, self.message = reason, status, message


@dataclass
class _Answer:
    content: str
    finish_reason: str | None
    prompt_tokens: int | None
    completion_tokens: int | None


def _error_message(r: httpx.Response) -> str:
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


class OpenAIEngine:
    """Pages to an OpenAI-compatible server (vLLM), many in flight, retried as the profile says."""

    name = "openai"

    def __init__(
        self,
        profile: Profile | str | None,
        settings=None,
        server: str | None = None,
        api_key: str | None = None,
        served_model: str | None = None,
        concurrency: int | None = None,
        stream: bool | None = None,
        max_tokens: int | None = None,
        ignore_eos: bool = False,
        timeout: float | None = None,
        backoff_s: float = 0.5,
        max_backoff_s: float = 30.0,
        **_: Any,
    ) -> None:
        from ocrserve.settings import get_settings

        self.profile = load_profile(profile)
        self.settings = settings or get_settings()
        self.base_url = normalize_base_url(server or self.settings.server or "")
        self.api_key = api_key or self.settings.api_key
        self.served_model = served_model or self.settings.served_model
        conc = concurrency or self.settings.concurrency or DEFAULT_CONCURRENCY
        if conc < 1:
            raise EngineError(f"concurrency must be at least 1, got {conc}")
        self._concurrency = int(conc)
        self.stream = bool(stream)
        self.max_tokens = max_tokens
        self.ignore_eos = bool(ignore_eos)
        self.timeout = float(timeout or self.settings.request_timeout or self._default_timeout())
        self.max_connection_retries = int(self.settings.max_connection_retries)
        self.backoff_s = float(backoff_s)
        self.max_backoff_s = float(max_backoff_s)
        self._prompt = self.profile.prompt
        self._templates: dict[tuple, tuple[bytes, bytes]] = {}
        self._client: httpx.AsyncClient | None = None
        self._sem: asyncio.Semaphore | None = None
        self._model_lock: asyncio.Lock | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self.max_model_len: int | None = None      # from /v1/models (vLLM) or a 400 answer
        self._prompt_overhead: int | None = None   # prompt tokens beyond the image's, learned from usage

    # ------------------------------------------------------------------ setup

    def _default_timeout(self) -> float:
        """A whole (non-streamed) answer arrives only when the page is done: give the longest page the
        profile allows time at a slow 8 tokens/s a request (a busy server, a small GPU). A streamed
        request's timeout holds between two pieces: 600 s is ample."""
        if self.stream:
            return 600.0
        budget = self.max_tokens or self.profile.sampling.max_tokens or 0
        return max(600.0, 60.0 + budget / 8.0)

    def capacity(self) -> int:
        return self._concurrency

    def _ensure_loop(self) -> httpx.AsyncClient:
        """The client and semaphore of the running event loop (made anew if the loop changed)."""
        loop = asyncio.get_running_loop()
        if self._client is None or self._loop is not loop:
            headers = {"Content-Type": "application/json", "Accept": "application/json"}
            if self.api_key:
                headers["Authorization"] = f"Bearer {self.api_key}"
            self._client = httpx.AsyncClient(
                base_url=self.base_url,
                headers=headers,
                http1=True,
                http2=False,
                timeout=httpx.Timeout(self.timeout, connect=min(30.0, self.timeout), pool=None),
                limits=httpx.Limits(
                    max_connections=self._concurrency + 4,   # room for /models checks beside a full batch
                    max_keepalive_connections=self._concurrency + 4,
                    keepalive_expiry=_KEEPALIVE_S,
                ),
            )
            self._sem = asyncio.Semaphore(self._concurrency)
            self._model_lock = asyncio.Lock()
            self._loop = loop
        return self._client

    async def aclose(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            try:
                await client.aclose()
            except RuntimeError:  # made on another (closed) event loop
                pass

    async def check(self) -> bool:
        """True when the server answers GET /v1/models (readiness)."""
        try:
            r = await self._ensure_loop().get("/models", timeout=10.0)
        except httpx.HTTPError:
            return False
        return r.status_code == 200

    async def preflight(self, attempts: int = 3) -> None:
        """Raise EngineError with the reason when the server cannot be used at all: unreachable,
        not an OpenAI-compatible server, the API key refused, or no such served model."""
        last = ""
        for n in range(attempts):
            try:
                r = await self._ensure_loop().get("/models", timeout=min(30.0, self.timeout))
            except httpx.HTTPError as e:
                last = f"cannot reach {self.base_url}: {type(e).__name__}: {e or 'connection failed'}"
                await asyncio.sleep(min(4.0, 0.5 * 2 ** n))
                continue
            if r.status_code in (401, 403):
                raise EngineError(f"{self.base_url} refused the request (HTTP {r.status_code}): check --api-key")
            if r.status_code >= 500 or r.status_code in _RETRYABLE_STATUS:
                last = f"{self.base_url}/models answered HTTP {r.status_code}"
                await asyncio.sleep(min(4.0, 0.5 * 2 ** n))
                continue
            if r.status_code != 200:
                raise EngineError(f"{self.base_url}/models answered HTTP {r.status_code}: is this an OpenAI-compatible "
                                  f"server (vLLM)? {_error_message(r)}")
            try:
                ids = [m.get("id") for m in r.json().get("data", [])]
            except (ValueError, AttributeError):
                raise EngineError(f"{self.base_url}/models did not answer JSON: not an OpenAI-compatible server") from None
            if self.served_model and self.served_model not in ids:
                raise EngineError(f"{self.base_url} serves {ids}, not {self.served_model!r} (--served-model)")
            if not ids:
                raise EngineError(f"{self.base_url} serves no model")
            return
        raise EngineError(last or f"cannot reach {self.base_url}")

    async def _model(self) -> str:
        if self.served_model:
            return self.served_model
        async with self._model_lock:
            if self.served_model:
                return self.served_model
            try:
                r = await self._client.get("/models", timeout=min(30.0, self.timeout))
            except httpx.HTTPError as e:
                raise _Retry(f"cannot reach {self.base_url}/models: {type(e).__name__}: {e}") from None
            if r.status_code >= 500 or r.status_code in _RETRYABLE_STATUS:
                raise _Retry(f"GET /models answered HTTP {r.status_code}: {_error_message(r)}")
            if r.status_code != 200:
                hint = " (check --api-key)" if r.status_code in (401, 403) else ""
                raise _Fatal(f"GET {self.base_url}/models answered HTTP {r.status_code}{hint}: {_error_message(r)}",
                             r.status_code)
            try:
                cards = r.json()["data"]
                self.served_model = str(cards[0]["id"])
                mml = cards[0].get("max_model_len")
                if isinstance(mml, int) and mml > 0:
                    self.max_model_len = mml
            except (ValueError, KeyError, IndexError, TypeError):
                raise _Fatal(f"{self.base_url}/models lists no model; pass --served-model") from None
            log.info("server %s serves model %r (max_model_len %s)", self.base_url, self.served_model,
                     self.max_model_len)
            return self.served_model

    # ------------------------------------------------------------------ request

    def _template(self, model: str, sampling: Sampling, max_tokens: int, stream: bool, mime: str) -> tuple[bytes, bytes]:
        key = (model, sampling.temperature, sampling.top_p, max_tokens, stream, mime)
        tpl = self._templates.get(key)
        if tpl is None:
            body: dict[str, Any] = {
                "model": model,
                "messages": [{
                    "role": "user",
                    "content": [
                        {"type": "image_url", "image_url": {"url": f"data:{mime};base64,{_IMG_MARK}"}},
                        {"type": "text", "text": self._prompt},
                    ],
                }],
                "temperature": sampling.temperature,
                "top_p": sampling.top_p,
                "max_tokens": max_tokens,
            }
            if self.ignore_eos:
                body["ignore_eos"] = True
            if stream:
                body["stream"] = True
                body["stream_options"] = {"include_usage": True}
            text = json.dumps(body, ensure_ascii=False).encode("utf-8")
            head, _, tail = text.partition(_IMG_MARK.encode())
            tpl = self._templates[key] = (head, tail)
        return tpl

    def _max_tokens_for(self, size: tuple[int, int] | None, limit: int | None) -> int:
        want = self.max_tokens or self.profile.sampling.max_tokens
        if limit is not None:
            want = min(want, limit)
        if self.max_model_len and self._prompt_overhead is not None and size:
            room = self.max_model_len - self.profile.image_tokens(*size) - self._prompt_overhead
            if room < want:
                want = max(1, room)
        return want

    async def _send(self, body: bytes, stream: bool, on_delta: "_Deltas | None") -> _Answer:
        client = self._client
        try:
            if not stream:
                r = await client.post("/chat/completions", content=body)
                self._check_status(r)
                return self._parse_json(r)
            async with client.stream("POST", "/chat/completions", content=body) as r:
                if r.status_code != 200:
                    await r.aread()
                    self._check_status(r)
                return await self._parse_sse(r, on_delta)
        except httpx.TimeoutException as e:
            raise _Retry(f"timed out ({type(e).__name__}) after {self.timeout:g} s") from None
        except httpx.HTTPError as e:
            raise _Retry(f"{type(e).__name__}: {e or 'connection failed'}") from None

    def _check_status(self, r: httpx.Response) -> None:
        if r.status_code == 200:
            return
        msg = _error_message(r)
        if r.status_code >= 500 or r.status_code in _RETRYABLE_STATUS:
            raise _Retry(f"HTTP {r.status_code}: {msg}", parse_retry_after(r.headers.get("retry-after")))
        hint = " (check --api-key)" if r.status_code in (401, 403) else ""
        raise _Fatal(f"server refused the request: HTTP {r.status_code}{hint}: {msg}", r.status_code, msg)

    @staticmethod
    def _parse_json(r: httpx.Response) -> _Answer:
        try:
            data = json.loads(r.content)
            choice = data["choices"][0]
            content = choice["message"].get("content") or ""
            usage = data.get("usage") or {}
        except (ValueError, KeyError, IndexError, TypeError, AttributeError):
            raise _Retry(f"malformed answer from the server: {r.text[:200]!r}") from None
        return _Answer(content, choice.get("finish_reason"), usage.get("prompt_tokens"), usage.get("completion_tokens"))

    async def _parse_sse(self, r: httpx.Response, on_delta: "_Deltas | None") -> _Answer:
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
                raise _Retry(f"malformed event in the stream: {data[:200]!r}") from None
            if chunk.get("error"):
                err = chunk["error"]
                raise _Retry(f"error in the stream: {err.get('message') if isinstance(err, dict) else err}")
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
            raise _Retry("the stream ended before the answer was complete")
        return _Answer("".join(parts), finish, usage.get("prompt_tokens"), usage.get("completion_tokens"))

    # ------------------------------------------------------------------ one page

    async def ocr(self, page: PageInput, *, on_delta: DeltaCallback | None = None) -> EngineResult:
        t0 = time.perf_counter()
        attempts = conn_failures = quality_retries = 0
        problems: list[str] = []
        last_raw: str | None = None
        sampling = self.profile.sampling
        max_tokens_limit: int | None = None
        stream = self.stream or on_delta is not None
        deltas = _Deltas(on_delta) if on_delta is not None else None

        def result(**kw: Any) -> EngineResult:
            extra = kw.pop("extra", {})
            if problems:
                extra["problems"] = list(problems)
            return EngineResult(engine=self.name, attempts=attempts, elapsed_s=time.perf_counter() - t0,
                                extra=extra, **kw)

        try:
            self._ensure_loop()
            data = page.png_bytes()
            mime = "image/jpeg" if data[:2] == b"\xff\xd8" else "image/png"
            size = page.image_size or _image_size(data)
            b64 = base64.b64encode(data)
        except Exception as e:  # a page we cannot even encode: fail it, never raise
            return result(ok=False, raw="", finish_reason="error", error=f"cannot encode the page image: {e}")
        while True:
            attempts += 1
            try:
                model = await self._model()
                max_tokens = self._max_tokens_for(size, max_tokens_limit)
                head, tail = self._template(model, sampling, max_tokens, stream, mime)
                if deltas is not None:
                    await deltas.reset()
                async with self._sem:
                    ans = await self._send(head + b64 + tail, stream, deltas)
            except _Retry as e:
                conn_failures += 1
                problems.append(e.reason)
                if conn_failures > self.max_connection_retries:
                    return result(ok=False, raw="", finish_reason="error",
                                  error=f"gave up after {attempts} attempts ({conn_failures} failed requests to "
                                        f"{self.base_url}); last: {e.reason}")
                delay = self._backoff(conn_failures, e.retry_after)
                log.info("page %s/%d: %s; retrying in %.2f s", page.doc_id, page.index, e.reason, delay)
                await asyncio.sleep(delay)
                continue
            except _Fatal as e:
                problems.append(e.reason)
                fixed = self._fix_context(e, size) if e.status == 400 and max_tokens_limit is None else None
                if fixed is not None:
                    max_tokens_limit = fixed
                    log.info("page %s/%d: max_tokens lowered to %d for the server's context", page.doc_id,
                             page.index, fixed)
                    continue
                return result(ok=False, raw="", finish_reason="error", error=e.reason)

            self._learn(ans, size)
            looped = not self.ignore_eos and is_repetition_loop(ans.content)
            cut = not self.ignore_eos and ans.finish_reason == "length"
            if looped or cut:
                last_raw = ans.content
                what = ("the answer ended in a repetition loop" if looped
                        else f"the answer was cut off at max_tokens={max_tokens} (finish_reason length)")
                problems.append(what)
                quality_retries += 1
                if quality_retries > self.profile.max_retries:
                    return result(ok=False, raw="", finish_reason="loop" if looped else "length",
                                  prompt_tokens=ans.prompt_tokens, completion_tokens=ans.completion_tokens,
                                  error=f"gave up after {attempts} attempts ({quality_retries} answers unusable); "
                                        f"last: {what}",
                                  extra={"last_raw": last_raw})
                sampling = self.profile.retry_sampling
                log.info("page %s/%d: %s; retrying with retry sampling", page.doc_id, page.index, what)
                continue
            return result(ok=True, raw=ans.content, finish_reason=ans.finish_reason,
                          prompt_tokens=ans.prompt_tokens, completion_tokens=ans.completion_tokens,
                          error=problems[-1] if problems else None,
                          extra={"retry_sampling": sampling is self.profile.retry_sampling} if problems else {})

    def _backoff(self, n: int, retry_after: float | None) -> float:
        delay = min(self.max_backoff_s, self.backoff_s * (2 ** (n - 1))) * random.uniform(0.5, 1.0)
        if retry_after is not None:
            delay = max(delay, min(retry_after, 120.0))
        return delay

    def _fix_context(self, e: _Fatal, size: tuple[int, int] | None) -> int | None:
        """max_tokens that fits, from vLLM's 400 'max_tokens ... is too large' answer; None if not that."""
        m = _TOO_LARGE.search(e.message)
        if not m:
            return None
        context, prompt = int(m.group(1)), int(m.group(2))
        self.max_model_len = context
        if size:
            self._prompt_overhead = max(0, prompt - self.profile.image_tokens(*size))
        room = context - prompt
        return room if room >= 1 else None

    def _learn(self, ans: _Answer, size: tuple[int, int] | None) -> None:
        if self._prompt_overhead is None and ans.prompt_tokens and size:
            self._prompt_overhead = max(0, ans.prompt_tokens - self.profile.image_tokens(*size))


class _Deltas:
    """The page's delta callback: pieces as they come, "" before a retried attempt's pieces."""

    def __init__(self, cb: DeltaCallback):
        self.cb: DeltaCallback | None = cb
        self.sent = False

    async def send(self, piece: str) -> None:
        if self.cb is None:
            return
        self.sent = self.sent or bool(piece)
        try:
            out = self.cb(piece)
            if inspect.isawaitable(out):
                await out
        except Exception:  # a failing consumer must not fail the page
            log.exception("on_delta callback failed; no more deltas for this page")
            self.cb = None

    async def reset(self) -> None:
        if self.sent:
            await self.send("")
            self.sent = False


__all__ = ["OpenAIEngine", "normalize_base_url", "parse_retry_after", "DEFAULT_CONCURRENCY"]


class MultiServerEngine:
    """Several OpenAI-compatible servers (vLLM data-parallel replicas) as one engine: each page goes
    to the server with the fewest pages in flight relative to its capacity."""

    name = "openai"

    def __init__(self, engines: list[OpenAIEngine]) -> None:
        if not engines:
            raise EngineError("no server URLs given")
        self.engines = engines
        self.profile = engines[0].profile
        self._in_flight = [0] * len(engines)

    def capacity(self) -> int:
        return sum(e.capacity() for e in self.engines)

    async def ocr(self, page: PageInput, *, on_delta: DeltaCallback | None = None) -> EngineResult:
        i = min(range(len(self.engines)), key=lambda k: self._in_flight[k] / max(1, self.engines[k].capacity()))
        self._in_flight[i] += 1
        try:
            res = await self.engines[i].ocr(page, on_delta=on_delta)
        finally:
            self._in_flight[i] -= 1
        res.extra["server"] = self.engines[i].base_url
        return res

    async def check(self) -> bool:
        results = await asyncio.gather(*(e.check() for e in self.engines), return_exceptions=True)
        return any(r is True for r in results)

    async def preflight(self) -> None:
        """Every replica must answer: a dead one would take its share of the pages to the fallback."""
        results = await asyncio.gather(*(e.preflight() for e in self.engines), return_exceptions=True)
        errors = [str(r) for r in results if isinstance(r, BaseException)]
        if errors:
            raise EngineError("; ".join(errors))

    async def aclose(self) -> None:
        await asyncio.gather(*(e.aclose() for e in self.engines), return_exceptions=True)
