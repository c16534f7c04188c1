"""Engine `openai`: any OpenAI-compatible chat-completions server; vLLM serving Chandra in production.

One `AsyncClient` of httpx2 (engines/http.py: httpx's API, a pool that stays cheap with 128 requests in
flight; HTTP/1.1, keep-alive, a connection per request in flight) sends each page
as the model expects it: one user turn, the page PNG as a data URL first, then the profile's prompt
byte for byte, with the profile's sampling (engines/chat.py builds it: the base64 image spliced into a
cached JSON template). The HTTP side (URL, answers, errors) is openai_http.py; the server's model list
(preflight, the served model's profile and name) openai_models.py; several servers as one engine is
openai_multi.py; a page's attempts over them openai_page.py; the loop / cut-off ladder is policy.py.

Retries (the engine owns them; it never raises for a page):
- a repetition loop or an answer cut off at max_tokens -> again with the profile's retry sampling,
  up to `profile.max_retries` times; then ok=False with the last answer in `extra["last_raw"]`;
- connection errors, timeouts, 5xx, 429 and 408, and an answer past its bounds -> exponential backoff
  with jitter (Retry-After honoured), up to `max_connection_retries` times; with several servers the
  next attempt goes to another one at once;
- each request has a total deadline (`deadline()`: 60 s + max_tokens / 8, at least 600 s, or the
  `timeout` option), and an answer is capped at what max_tokens allows (openai_http.py: its bytes, its
  completion_tokens); past either, the attempt failed;
- a circuit breaker a server (openai_breaker.py): after `down_after` requests in a row it did not
  answer, no page goes to it until a probe answers; with every server's breaker open a page fails at
  once (the fallback takes it) instead of paying its own backoff ladder;
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
import logging
import random
import re
from dataclasses import dataclass
from typing import Any

from pydantic import Field

from ocrserve.engines.base import (
    DeltaCallback,
    Engine,
    EngineOptions,
    EngineResult,
    GenerationOptions,
    PageInput,
    deadline_option,
)
from ocrserve.engines.chat import BodyTemplate
from ocrserve.engines.deltas import Deltas
from ocrserve.engines.http import httpx
from ocrserve.engines.openai_breaker import Breaker
from ocrserve.engines.openai_http import (
    Answer,
    Fatal,
    Retry,
    check_status,
    normalize_base_url,
    parse_retry_after,
    parse_sse,
    read_json,
)
from ocrserve.engines.openai_models import first_served, models_ready, preflight_card, profile_for_card
from ocrserve.engines.openai_page import ocr_page
from ocrserve.engines.policy import Ladder
from ocrserve.engines.registry import register_engine
from ocrserve.profiles import Profile, load_profile

log = logging.getLogger(__name__)

DEFAULT_CONCURRENCY = 128  # enough requests in flight to keep a vLLM batch full on one GPU
_TOO_LARGE = re.compile(
    r"maximum context length is (\d+) tokens.*?(?:has|contains(?: at least)?) (\d+) input tokens", re.S
)
_KEEPALIVE_S = 4.0  # below uvicorn's (vLLM's) 5 s idle timeout: never reuse a closing socket


@dataclass
class _Session:
    """The engine's HTTP client and its limits, made on (and bound to) one event loop."""

    loop: asyncio.AbstractEventLoop
    client: httpx.AsyncClient
    sem: asyncio.Semaphore  # requests in flight
    model_lock: asyncio.Lock  # one GET /models when the served model is not known yet
    chat_url: httpx.URL  # base_url + /chat/completions, merged once (httpx parses a relative URL per request)


class OpenAIOptions(GenerationOptions):
    """The openai engine's options (create_engine fills the unset ones from the OCRSERVE_ knobs named)."""

    settings_defaults = {
        "server": "server",
        "api_key": "api_key",
        "served_model": "served_model",
        "concurrency": "concurrency",
        "timeout": "request_timeout",
        "max_connection_retries": "max_connection_retries",
    }

    server: str | None = Field(
        None,
        description="base URL of the OpenAI-compatible server (vLLM), e.g. "
        "http://localhost:8000/v1; several, comma-separated: replicas, pages to the least busy",
    )
    api_key: str | None = Field(None, description="API key for the server")
    served_model: str | None = Field(None, description="the model's name on the server (unset: asked, /v1/models)")
    concurrency: int | None = Field(None, ge=0, description=f"requests in flight (unset or 0: {DEFAULT_CONCURRENCY})")
    stream: bool = Field(False, description="stream every answer (always when the caller takes the text as it comes)")
    timeout: float | None = deadline_option(
        "seconds a request may take in all (its deadline, streamed or not); "
        "unset: 60 + max_tokens / 8 of the request, at least 600"
    )
    max_connection_retries: int = Field(
        5,
        ge=0,
        description="failed requests (connection errors, 5xx, deadlines, oversized answers) before a page fails",
    )
    backoff_s: float = Field(0.5, ge=0, description="first wait before a request is sent again (doubling)")
    max_backoff_s: float = Field(30.0, ge=0, description="longest wait between two tries")
    down_after: int = Field(
        3, ge=1, description="requests in a row a server did not answer before it counts as down (circuit breaker)"
    )
    down_cooldown_s: float = Field(
        2.0, ge=0, description="seconds a down server gets no page before one probes it (doubling, at most 60)"
    )


@register_engine
class OpenAIEngine(Engine):
    """Pages to an OpenAI-compatible server (vLLM), many in flight, retried as the profile says."""

    name = "openai"
    Options = OpenAIOptions
    needs_gpu = True  # Ray: an actor per GPU, each talking to the server beside it ({node_ip})
    preflight_on_driver = True  # the Ray driver checks the server and its model before any page

    def __init__(self, profile: Profile | str | None, options: OpenAIOptions | None = None, **values) -> None:
        o: OpenAIOptions = self.options_of(options, values)
        self.profile_chosen = profile is not None  # else the profile follows what the server serves (preflight)
        self.profile = load_profile(profile)
        self.base_url = normalize_base_url(o.server or "")
        self.api_key = o.api_key
        self.served_model = o.served_model
        self._concurrency = int(o.concurrency or DEFAULT_CONCURRENCY)
        self.stream = o.stream
        self.max_tokens = o.max_tokens
        self.max_retries = o.max_retries  # retries of a looping answer (None: the profile's)
        self.ignore_eos = o.ignore_eos
        self.timeout_given = o.timeout
        self.timeout = self.deadline(self.max_tokens or self.profile.sampling.max_tokens)
        self.max_connection_retries = o.max_connection_retries
        self.backoff_s = o.backoff_s
        self.max_backoff_s = o.max_backoff_s
        self._prompt = self.profile.prompt
        self._body = BodyTemplate(self._prompt, ignore_eos=self.ignore_eos)
        self._session: _Session | None = None
        self.max_model_len: int | None = None  # from /v1/models (vLLM) or a 400 answer
        self._prompt_overhead: int | None = None  # prompt tokens beyond the image's, learned from usage
        self.breaker = Breaker(self.base_url, o.down_after, o.down_cooldown_s)

    @classmethod
    def create(cls, profile: Profile | str | None, options: EngineOptions) -> Engine:
        """Several comma-separated servers (data-parallel replicas): one engine each, as one engine."""
        server = getattr(options, "server", None) or ""
        if "," not in server:
            return cls(profile, options)  # type: ignore[arg-type]
        from ocrserve.engines.openai_multi import MultiServerEngine

        urls = [u.strip() for u in server.split(",") if u.strip()]
        return MultiServerEngine([cls(profile, options.model_copy(update={"server": u})) for u in urls])  # type: ignore[arg-type]

    # ------------------------------------------------------------------ setup

    def deadline(self, max_tokens: int) -> float:
        """Seconds one request asking for max_tokens may take in all, streamed or not: the `timeout`
        option when given, else time for the whole answer at a slow 8 tokens/s (a busy server, a small
        GPU) after 60 s for the queue and the prefill, at least 600 s: 1,608 s at Chandra 2's 12,384."""
        if self.timeout_given:
            return float(self.timeout_given)
        return max(600.0, 60.0 + max_tokens / 8.0)

    def capacity(self) -> int:
        return self._concurrency

    def _session_now(self) -> _Session:
        """The client and semaphore of the running event loop (made anew if the loop changed)."""
        loop = asyncio.get_running_loop()
        if self._session is None or self._session.loop is not loop:
            headers = {"Content-Type": "application/json", "Accept": "application/json"}
            if self.api_key:
                headers["Authorization"] = f"Bearer {self.api_key}"
            client = httpx.AsyncClient(
                base_url=self.base_url,
                headers=headers,
                http1=True,
                http2=False,
                timeout=httpx.Timeout(self.timeout, connect=min(30.0, self.timeout), pool=None),
                limits=httpx.Limits(
                    max_connections=self._concurrency + 4,  # room for /models checks beside a full batch
                    max_keepalive_connections=self._concurrency + 4,
                    keepalive_expiry=_KEEPALIVE_S,
                ),
            )
            chat_url = client.build_request("POST", "/chat/completions").url
            self._session = _Session(loop, client, asyncio.Semaphore(self._concurrency), asyncio.Lock(), chat_url)
        return self._session

    async def aclose(self) -> None:
        session, self._session = self._session, None
        if session is not None:
            try:
                await session.client.aclose()
            except RuntimeError:  # made on another (closed) event loop
                pass

    async def check(self) -> bool:
        """True when the server answers GET /v1/models (readiness)."""
        return await models_ready(self._session_now().client)

    async def preflight(self, attempts: int = 3) -> None:
        """Raise EngineError with the reason when the server cannot be used at all: unreachable,
        not an OpenAI-compatible server, the API key refused, or no such served model; then follow
        (or check) the profile of the model it serves."""
        client = self._session_now().client
        self.match_profile(
            await preflight_card(client, self.base_url, self.served_model, min(30.0, self.timeout), attempts)
        )

    def match_profile(self, card: dict[str, Any]) -> None:
        """Check the profile against the model the server lists, before any page is sent: a chosen built-in
        profile that is not the served model is an EngineError; without a chosen one the served model's
        profile is taken (the default, chandra-2, when the server's model is none of the known ones)."""
        profile = profile_for_card(card, self.profile, self.profile_chosen, self.base_url)
        if profile is not self.profile:
            self.set_profile(profile)

    def set_profile(self, profile: Profile) -> None:
        """Speak to the server as `profile` (its prompt, sampling, box format)."""
        self.profile = profile
        self._prompt = profile.prompt
        self._body = BodyTemplate(self._prompt, ignore_eos=self.ignore_eos)
        log.info("server %s serves %s: profile %s", self.base_url, profile.checkpoint, profile.name)

    async def _model(self, session: _Session) -> str:
        if self.served_model:
            return self.served_model
        async with session.model_lock:
            if self.served_model:
                return self.served_model
            name, max_model_len = await first_served(session.client, self.base_url, min(30.0, self.timeout))
            self.served_model = name
            if max_model_len is not None:
                self.max_model_len = max_model_len
            log.info("server %s serves model %r (max_model_len %s)", self.base_url, name, self.max_model_len)
            return name

    # ------------------------------------------------------------------ request

    def _max_tokens_for(self, size: tuple[int, int] | None, limit: int | None) -> int:
        want = self.max_tokens or self.profile.sampling.max_tokens
        if limit is not None:
            want = min(want, limit)
        if self.max_model_len and self._prompt_overhead is not None and size:
            room = self.max_model_len - self.profile.image_tokens(*size) - self._prompt_overhead
            if room < want:
                want = max(1, room)
        return want

    async def _send(
        self, session: _Session, body: bytes, stream: bool, on_delta: Deltas | None, max_tokens: int
    ) -> Answer:
        deadline = self.deadline(max_tokens)
        try:
            async with asyncio.timeout(deadline):
                async with session.client.stream("POST", session.chat_url, content=body) as r:
                    if r.status_code != 200:
                        await r.aread()
                        check_status(r)
                    return await (parse_sse(r, on_delta, max_tokens) if stream else read_json(r, max_tokens))
        except TimeoutError:
            raise Retry(
                f"timed out: no complete answer within the request's deadline of {deadline:g} s", down=True
            ) from None
        except httpx.TimeoutException as e:
            raise Retry(f"timed out ({type(e).__name__}) after {self.timeout:g} s", down=True) from None
        except httpx.HTTPError as e:
            raise Retry(f"{type(e).__name__}: {e or 'connection failed'}", down=True) from None

    # ------------------------------------------------------------------ one page

    async def ocr(self, page: PageInput, *, on_delta: DeltaCallback | None = None) -> EngineResult:
        return await ocr_page([self], page, on_delta)

    async def attempt(
        self,
        ladder: Ladder,
        size: tuple[int, int] | None,
        mime: str,
        b64: bytes,
        limit: int | None,
        stream: bool,
        deltas: Deltas | None,
    ) -> tuple[Answer, int]:
        """One request for a page to this server: (the answer, the max_tokens it asked for); Retry or
        Fatal when there is none. The server's breaker hears how it went."""
        probe = self.breaker.take()
        try:
            session = self._session_now()
            model = await self._model(session)
            max_tokens = self._max_tokens_for(size, limit)
            body = self._body.render(model, ladder.sampling(), max_tokens, stream, mime, b64)
            if deltas is not None:
                await deltas.reset()
            async with session.sem:
                ans = await self._send(session, body, stream, deltas, max_tokens)
        except Retry as e:
            if e.down:
                self.breaker.failed(e.reason, probe)
            else:
                self.breaker.answered()
            raise
        except Fatal:
            self.breaker.answered()
            raise
        except BaseException:
            self.breaker.release(probe)
            raise
        self.breaker.answered()
        self._learn(ans, size)
        return ans, max_tokens

    def backoff(self, n: int, retry_after: float | None) -> float:
        """Seconds to wait before the n-th retry of a failed request."""
        delay = min(self.max_backoff_s, self.backoff_s * (2 ** (n - 1))) * random.uniform(0.5, 1.0)
        if retry_after is not None:
            delay = max(delay, min(retry_after, 120.0))
        return delay

    def fix_context(self, e: Fatal, size: tuple[int, int] | None) -> int | None:
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

    def _learn(self, ans: Answer, size: tuple[int, int] | None) -> None:
        if self._prompt_overhead is None and ans.prompt_tokens and size:
            self._prompt_overhead = max(0, ans.prompt_tokens - self.profile.image_tokens(*size))


__all__ = ["OpenAIEngine", "normalize_base_url", "parse_retry_after", "DEFAULT_CONCURRENCY"]
