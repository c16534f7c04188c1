"""A stand-in for a vLLM server: a real HTTP process speaking OpenAI chat completions, failing on cue.

Run it by hand:

    python -m tests.fakes.standin --port 8000 [--host 127.0.0.1] [--config '{"delay_s": 0.2}']

or from tests through the `standin` fixture (tests/conftest.py), which starts one
process for the whole pytest session and resets its config and statistics before each test. Code
outside pytest (benchmarks) uses `start_standin(**config)` / `StandIn.stop()`.

Endpoints (as vLLM serves them, plus two for the tests):
  GET  /health, GET /v1/models (id "chandra", max_model_len), GET /metrics (vLLM-named gauges)
  POST /v1/chat/completions  JSON or `stream: true` SSE; the request must be one user message whose
       content is [image_url (data:image/png|jpeg;base64,...), text], else 400 like vLLM.
  POST /_control  set the config (see `StandInConfig`); `{"reset": true}` also clears the stats
  GET  /_stats    requests, attempts per image (sha256 of the decoded image), max in flight, last
                  request's prompt and sampling, a short log of recent requests

The answer is a deterministic Chandra-1 raw output derived from the image: a Section-Header
`<h1>Page {sha256[:12]}</h1>`, Text paragraphs, a Table, inline math, a checkbox, an Image block,
so a test can tell that each page's output came from its own image (`expected_output(png_bytes)`).

Cues, per attempt of each distinct image (`plans` by sha256 prefix, else `default_plan`; once a plan
is used up the answer is "ok"): ok, slow:<seconds>, 500, 503, 400, 429, drop (close the connection
mid-response), loop (a repetition loop up to max_tokens, finish_reason length), cutoff (last block
unterminated, finish_reason length), garbage (text that is no Chandra layout); and the hostile ones:
trickle (an answer that never ends: one piece every `trickle_s` seconds, streamed as SSE events or,
not streaming, as a JSON body one byte at a time, until the client hangs up), huge (`huge_chars` of
varied, loop-free text with finish_reason stop and its honest completion_tokens, far above
max_tokens), overcount (the ok answer, but usage.completion_tokens = max_tokens + 1000), die (the
whole server process exits on the request: a replica that died; later requests are refused).
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import binascii
import hashlib
import io
import json
import logging
import math
import os
import socket
import subprocess
import sys
import time
import uuid
from collections import deque
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field, field_validator

from ocrserve.vllm.router import read_body, respond

log = logging.getLogger("standin")

CHARS_PER_TOKEN = 4
PROMPT_TEXT_TOKENS = 400  # the prompt's text, as the usage figure counts it
PATCH = 32  # patch 16 x spatial merge 2: one visual token per 32x32 pixels
STEPS = {"ok", "500", "503", "400", "429", "drop", "loop", "cutoff", "garbage", "trickle", "huge", "overcount", "die"}


# ---------------------------------------------------------------------------------------- config


class StandInConfig(BaseModel):
    """What /_control sets. Unknown keys are refused (a typo in a test should fail loudly)."""

    model_config = {"extra": "forbid"}

    model: str = "chandra"  # the served model name
    root: str = "datalab-to/chandra"  # the checkpoint it stands in for (its answers are Chandra 1's)
    max_model_len: int = 16384  # prompt + max_tokens above this: 400, as vLLM answers
    api_key: str | None = None  # when set, requests need `Authorization: Bearer <key>`
    delay_s: float = 0.0  # latency before the first token of every answer
    token_delay_s: float = 0.0  # per streamed chunk (and per chunk's worth, not streaming)
    chunk_chars: int = 4  # characters per streamed content delta (~ one token)
    max_concurrency: int = 0  # simulated batch size: beyond it requests wait (0 = no limit)
    retry_after: str | None = "0"  # Retry-After header sent with 429 and 503
    hold_until_in_flight: int = 0  # hold each answer until this many requests are in flight
    hold_timeout_s: float = 5.0  #   (or this long): tests of concurrency without timing
    trickle_s: float = 0.1  # "trickle": seconds between two pieces of the never-ending answer
    huge_chars: int = 2_000_000  # "huge": characters of the answer
    plans: dict[str, list[str]] = Field(default_factory=dict)  # sha256 prefix -> steps per attempt
    default_plan: list[str] = Field(default_factory=list)  # for images no plan names

    @field_validator("plans")
    @classmethod
    def _check_plans(cls, v: dict[str, list[str]]) -> dict[str, list[str]]:
        for steps in v.values():
            _check_steps(steps)
        return v

    @field_validator("default_plan")
    @classmethod
    def _check_default(cls, v: list[str]) -> list[str]:
        return _check_steps(v)


def _check_steps(steps: list[str]) -> list[str]:
    for s in steps:
        if s.startswith("slow:"):
            float(s[5:])
        elif s not in STEPS:
            raise ValueError(f"unknown plan step {s!r}: use one of {sorted(STEPS)} or slow:<seconds>")
    return steps


# -------------------------------------------------------------------------------- canned answers

_WORDS = (
    "revenue grew across every region while operating costs fell in the second half as the new "
    "plant reached full capacity and the board approved a dividend for the fiscal year under "
    "review with net income rising on higher volumes and stable prices in the core markets"
).split()


def _sentence(seed: bytes, n: int) -> str:
    words = [_WORDS[b % len(_WORDS)] for b in seed[:n]]
    return (" ".join(words)).capitalize() + "."


def chandra_output(sha: str, width: int, height: int) -> str:
    """The stand-in's answer for an image: realistic Chandra-1 layout blocks, unique per image."""
    seed = bytes.fromhex(sha)
    paras = 1 + seed[0] % 3
    blocks = [f'<div data-bbox="[62, 40, 958, 88]" data-label="Section-Header"><h1>Page {sha[:12]}</h1></div>']
    y = 102
    for i in range(paras):
        text = _sentence(seed[i * 8 :], 16) + " " + _sentence(seed[i * 8 + 3 :], 12)
        blocks.append(
            f'<div data-bbox="[62, {y}, 958, {y + 60}]" data-label="Text"><p>{text} '
            f"<b>{seed[i] % 50 + 1}%</b> for image {width}x{height}.</p></div>"
        )
        y += 72
    blocks.append(
        f'<div data-bbox="[62, {y}, 958, {y + 200}]" data-label="Table"><table>'
        "<tr><th>Quarter</th><th>Revenue</th><th>Margin</th></tr>"
        + "".join(
            f"<tr><td>Q{q + 1}</td><td>{int.from_bytes(seed[q * 2 : q * 2 + 2], 'big')}</td>"
            f"<td>{seed[20 + q] % 40}%</td></tr>"
            for q in range(4)
        )
        + "</table></div>"
    )
    y += 216
    blocks.append(
        f'<div data-bbox="[62, {y}, 500, {y + 24}]" data-label="Text"><p>Inline '
        f"<math>x_{{n}} = {int(sha[:4], 16)}</math> and a box "
        '<input type="checkbox" checked> done</p></div>'
    )
    y += 40
    blocks.append(
        f'<div data-bbox="[120, {y}, 880, {min(y + 250, 1000)}]" data-label="Image">'
        f'<img alt="Bar chart of revenue by quarter for page {sha[:12]}"/></div>'
    )
    return "\n".join(blocks)


def expected_output(image_bytes: bytes) -> str:
    """What the stand-in answers ("ok", default max_tokens) for these encoded image bytes."""
    from PIL import Image

    with Image.open(io.BytesIO(image_bytes)) as im:
        w, h = im.size
    return chandra_output(hashlib.sha256(image_bytes).hexdigest(), w, h)


def _filler(sha: str, start: int, need: int) -> str:
    """Varied Text blocks (never a loop) to make an ignore_eos answer exactly as long as asked."""
    out, i, size = [], start, 0
    seed = bytes.fromhex(sha)
    while size < need:
        b = (
            f'\n<div data-bbox="[62, 900, 958, 960]" data-label="Text"><p>Paragraph {i}: '
            + _sentence(seed[i % 24 :] + seed, 14)
            + "</p></div>"
        )
        out.append(b)
        size += len(b)
        i += 1
    return "".join(out)[:need]


def make_answer(
    step: str, sha: str, width: int, height: int, max_tokens: int, ignore_eos: bool, huge_chars: int = 2_000_000
) -> tuple[str, str]:
    """(content, finish_reason) for one attempt."""
    limit = max_tokens * CHARS_PER_TOKEN
    ok = chandra_output(sha, width, height)
    if step == "loop":
        head = ok.split("\n")[0] + '\n<div data-bbox="[62, 102, 958, 900]" data-label="Text"><p>'
        unit = "the same words again "
        body = head + unit * (limit // len(unit) + 1)
        return body[:limit], "length"
    if step == "cutoff":
        cut = ok.rfind("\n") + 1 + (len(ok) - ok.rfind("\n")) // 2
        text = ok[: min(cut, limit)]
        return text, "length"
    if step == "huge":
        return (ok + _filler(sha, 1, huge_chars - len(ok)))[:huge_chars], "stop"
    if step == "garbage":
        text = "I am unable to read this page. " + " ".join(sha[i : i + 5] for i in range(0, 40, 5)) + " @@ ## %%"
        return text[:limit], "stop" if len(text) <= limit else "length"
    # ok
    if ignore_eos:
        if len(ok) < limit:
            ok = ok + _filler(sha, 1, limit - len(ok))
        return ok[:limit], "length"
    if len(ok) > limit:
        return ok[:limit], "length"
    return ok, "stop"


# ------------------------------------------------------------------------------------- the server


class HTTPError(Exception):
    def __init__(
        self,
        status: int,
        message: str,
        type_: str = "BadRequestError",
        param: str | None = None,
        headers: dict[str, str] | None = None,
    ):
        super().__init__(message)
        self.status, self.message, self.type, self.param = status, message, type_, param
        self.headers = headers or {}

    def body(self) -> bytes:
        return json.dumps(
            {"error": {"message": self.message, "type": self.type, "param": self.param, "code": self.status}}
        ).encode()


class Dropped(Exception):
    """Raised inside the ASGI app after a partial response: uvicorn then closes the connection."""


class State:
    def __init__(self, config: StandInConfig):
        self.config = config
        self.reset_stats()
        self.running = 0
        self.gate = asyncio.Condition()
        self.wave = asyncio.Event()  # set when hold_until_in_flight requests are held
        self.held = 0
        self.handlers: set[asyncio.Task] = set()

    def reset_stats(self) -> None:
        self.total_requests = 0
        self.completed = 0
        self.attempts: dict[str, int] = {}
        self.in_flight = 0
        self.max_in_flight = 0
        self.max_running = 0
        self.last: dict[str, Any] | None = None
        self.log: deque[dict[str, Any]] = deque(maxlen=2000)
        self.prompt_tokens_total = 0
        self.generation_tokens_total = 0

    def stats(self) -> dict[str, Any]:
        return {
            "total_requests": self.total_requests,
            "completed": self.completed,
            "attempts": dict(self.attempts),
            "in_flight": self.in_flight,
            "max_in_flight": self.max_in_flight,
            "running": self.running,
            "max_running": self.max_running,
            "last": self.last,
            "log": list(self.log),
            "prompt_tokens_total": self.prompt_tokens_total,
            "generation_tokens_total": self.generation_tokens_total,
        }

    def plan_step(self, sha: str) -> tuple[int, str]:
        n = self.attempts.get(sha, 0)
        self.attempts[sha] = n + 1
        plan = self.config.default_plan
        for prefix, steps in self.config.plans.items():
            if sha.startswith(prefix.lower()):
                plan = steps
                break
        return n + 1, (plan[n] if n < len(plan) else "ok")

    async def hold(self) -> None:
        """Wait until `hold_until_in_flight` requests are in flight; that request releases the wave."""
        n = self.config.hold_until_in_flight
        if n <= 0:
            return
        self.held += 1
        if self.held >= n:
            self.wave.set()
            self.wave, self.held = asyncio.Event(), 0
            return
        wave = self.wave
        try:
            await asyncio.wait_for(wave.wait(), self.config.hold_timeout_s)
        except TimeoutError:
            if wave is self.wave:
                self.held -= 1

    async def acquire(self) -> None:
        async with self.gate:
            await self.gate.wait_for(
                lambda: self.config.max_concurrency <= 0 or self.running < self.config.max_concurrency
            )
            self.running += 1
            self.max_running = max(self.max_running, self.running)

    async def release(self) -> None:
        async with self.gate:
            self.running -= 1
            self.gate.notify_all()


def validate_request(body: Any, cfg: StandInConfig) -> dict[str, Any]:
    """Check a chat-completions body as vLLM + Chandra expect it; return what the answer needs."""
    if not isinstance(body, dict):
        raise HTTPError(400, "request body must be a JSON object")
    if body.get("model") != cfg.model:
        raise HTTPError(404, f"The model `{body.get('model')}` does not exist.", "NotFoundError", "model")
    msgs = body.get("messages")
    if not isinstance(msgs, list) or len(msgs) != 1:
        raise HTTPError(400, "expected exactly one message (one user turn, no system prompt)", param="messages")
    msg = msgs[0]
    if not isinstance(msg, dict) or msg.get("role") != "user":
        raise HTTPError(400, "the message must have role 'user'", param="messages")
    content = msg.get("content")
    if not isinstance(content, list) or len(content) != 2:
        raise HTTPError(400, "message content must be [image_url, text]", param="messages")
    img, txt = content
    if not isinstance(img, dict) or img.get("type") != "image_url" or not isinstance(img.get("image_url"), dict):
        raise HTTPError(400, "the first content part must be an image_url", param="messages")
    if (
        not isinstance(txt, dict)
        or txt.get("type") != "text"
        or not isinstance(txt.get("text"), str)
        or not txt["text"]
    ):
        raise HTTPError(400, "the second content part must be non-empty text", param="messages")
    url = img["image_url"].get("url")
    if not isinstance(url, str):
        raise HTTPError(400, "image_url.url must be a string", param="messages")
    for prefix in ("data:image/png;base64,", "data:image/jpeg;base64,"):
        if url.startswith(prefix):
            break
    else:
        raise HTTPError(400, "image_url.url must be a data:image/png or data:image/jpeg base64 URL", param="messages")
    try:
        data = base64.b64decode(url[len(prefix) :], validate=True)
    except (binascii.Error, ValueError) as e:
        raise HTTPError(400, f"invalid base64 image data: {e}", param="messages") from None
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(io.BytesIO(data)) as im:
            width, height = im.size
    except (UnidentifiedImageError, OSError) as e:
        raise HTTPError(400, f"cannot identify image file: {e}", param="messages") from None
    sampling = {k: body.get(k) for k in ("temperature", "top_p", "max_tokens", "ignore_eos")}
    for k in ("temperature", "top_p"):
        if sampling[k] is not None and not isinstance(sampling[k], (int, float)):
            raise HTTPError(400, f"{k} must be a number", param=k)
    mt = body.get("max_completion_tokens") or body.get("max_tokens")
    if mt is not None and (not isinstance(mt, int) or mt < 1):
        raise HTTPError(400, "max_tokens must be a positive integer", param="max_tokens")
    prompt_tokens = (width // PATCH) * (height // PATCH) + PROMPT_TEXT_TOKENS
    if prompt_tokens >= cfg.max_model_len:
        raise HTTPError(
            400,
            f"This model's maximum context length is {cfg.max_model_len} tokens. However, your request has "
            f"{prompt_tokens} input tokens. Please reduce the length of the input messages.",
            param="input_tokens",
        )
    if mt is None:
        mt = cfg.max_model_len - prompt_tokens
    elif prompt_tokens + mt > cfg.max_model_len:
        raise HTTPError(
            400,
            f"'max_tokens' or 'max_completion_tokens' is too large: {mt}. This model's maximum context length "
            f"is {cfg.max_model_len} tokens and your request has {prompt_tokens} input tokens "
            f"({mt} > {cfg.max_model_len} - {prompt_tokens}). (parameter=max_tokens, value={mt})",
            param="max_tokens",
        )
    stream_opts = body.get("stream_options") or {}
    return {
        "sha": hashlib.sha256(data).hexdigest(),
        "width": width,
        "height": height,
        "prompt": txt["text"],
        "prompt_tokens": prompt_tokens,
        "max_tokens": mt,
        "ignore_eos": bool(body.get("ignore_eos")),
        "stream": bool(body.get("stream")),
        "include_usage": bool(isinstance(stream_opts, dict) and stream_opts.get("include_usage")),
        "sampling": sampling,
        "image_mime": prefix[5:-8],
    }


class App:
    """The ASGI application (plain ASGI: full control over partial responses and dropped connections)."""

    def __init__(self, config: StandInConfig):
        self.state = State(config)
        self.created = int(time.time())

    async def __call__(self, scope, receive, send):
        if scope["type"] == "lifespan":
            while True:
                msg = await receive()
                if msg["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                elif msg["type"] == "lifespan.shutdown":
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        if scope["type"] != "http":
            return
        method, path = scope["method"], scope["path"]
        try:
            if path == "/health" and method == "GET":
                await respond(send, 200, b"", "text/plain")
            elif path == "/v1/models" and method == "GET":
                await self.models(scope, send)
            elif path == "/v1/chat/completions" and method == "POST":
                await self.chat(scope, receive, send)
            elif path == "/metrics" and method == "GET":
                await respond(send, 200, self.metrics().encode(), "text/plain; version=0.0.4")
            elif path == "/_control" and method == "POST":
                await self.control(receive, send)
            elif path == "/_stats" and method == "GET":
                await respond(send, 200, json.dumps(self.state.stats()).encode())
            else:
                raise HTTPError(404, f"no route {method} {path}", "NotFoundError")
        except HTTPError as e:
            await respond(send, e.status, e.body(), headers=e.headers)

    def _check_auth(self, scope) -> None:
        key = self.state.config.api_key
        if key:
            auth = dict(scope["headers"]).get(b"authorization", b"").decode()
            if auth != f"Bearer {key}":
                raise HTTPError(401, "Unauthorized", "AuthenticationError")

    async def models(self, scope, send) -> None:
        self._check_auth(scope)
        cfg = self.state.config
        card = {
            "id": cfg.model,
            "object": "model",
            "created": self.created,
            "owned_by": "vllm",
            "root": cfg.root,
            "parent": None,
            "max_model_len": cfg.max_model_len,
        }
        await respond(send, 200, json.dumps({"object": "list", "data": [card]}).encode())

    def metrics(self) -> str:
        st, cfg = self.state, self.state.config
        waiting = max(0, st.in_flight - st.running)
        usage = (st.running / cfg.max_concurrency) if cfg.max_concurrency > 0 else min(1.0, st.running / 256)
        lbl = f'{{model_name="{cfg.model}"}}'
        lines = [
            "# HELP vllm:num_requests_running Number of requests in model execution batches.",
            "# TYPE vllm:num_requests_running gauge",
            f"vllm:num_requests_running{lbl} {float(st.running)}",
            "# HELP vllm:num_requests_waiting Number of requests waiting to be processed.",
            "# TYPE vllm:num_requests_waiting gauge",
            f"vllm:num_requests_waiting{lbl} {float(waiting)}",
            "# HELP vllm:gpu_cache_usage_perc GPU KV-cache usage. 1 means 100 percent usage.",
            "# TYPE vllm:gpu_cache_usage_perc gauge",
            f"vllm:gpu_cache_usage_perc{lbl} {usage}",
            "# HELP vllm:kv_cache_usage_perc KV-cache usage. 1 means 100 percent usage.",
            "# TYPE vllm:kv_cache_usage_perc gauge",
            f"vllm:kv_cache_usage_perc{lbl} {usage}",
            "# HELP vllm:prompt_tokens_total Number of prefill tokens processed.",
            "# TYPE vllm:prompt_tokens_total counter",
            f"vllm:prompt_tokens_total{lbl} {float(st.prompt_tokens_total)}",
            "# HELP vllm:generation_tokens_total Number of generation tokens processed.",
            "# TYPE vllm:generation_tokens_total counter",
            f"vllm:generation_tokens_total{lbl} {float(st.generation_tokens_total)}",
            "# HELP vllm:request_success_total Count of successfully processed requests.",
            "# TYPE vllm:request_success_total counter",
            f"vllm:request_success_total{lbl} {float(st.completed)}",
        ]
        return "\n".join(lines) + "\n"

    async def control(self, receive, send) -> None:
        try:
            data = json.loads(await _read_body(receive) or b"{}")
            reset = bool(data.pop("reset", False))
            base = StandInConfig() if reset else self.state.config
            cfg = StandInConfig.model_validate({**base.model_dump(), **data})
        except (ValueError, TypeError) as e:
            raise HTTPError(400, f"bad control request: {e}") from None
        self.state.config = cfg
        if reset:
            # answers still running from an earlier test (a client that timed out) end now
            tasks = [t for t in self.state.handlers if t is not asyncio.current_task()]
            for t in tasks:
                t.cancel()
            if tasks:
                await asyncio.wait(tasks, timeout=5)
            self.state.reset_stats()
            self.state.wave, self.state.held = asyncio.Event(), 0
        async with self.state.gate:
            self.state.gate.notify_all()
        await respond(send, 200, cfg.model_dump_json().encode())

    async def chat(self, scope, receive, send) -> None:
        st = self.state
        st.total_requests += 1
        st.in_flight += 1
        st.max_in_flight = max(st.max_in_flight, st.in_flight)
        task = asyncio.current_task()
        st.handlers.add(task)
        try:
            raw = await _read_body(receive)
            self._check_auth(scope)
            try:
                body = json.loads(raw)
            except ValueError as e:
                raise HTTPError(400, f"request body is not valid JSON: {e}") from None
            cfg = st.config
            req = validate_request(body, cfg)
            attempt, step = st.plan_step(req["sha"])
            st.last = {
                "prompt": req["prompt"],
                "sampling": req["sampling"],
                "stream": req["stream"],
                "sha": req["sha"],
                "attempt": attempt,
                "step": step,
                "image_mime": req["image_mime"],
                "width": req["width"],
                "height": req["height"],
            }
            st.log.append(
                {"sha": req["sha"][:16], "attempt": attempt, "step": step, **req["sampling"], "stream": req["stream"]}
            )
            await self.answer(req, step, send, receive)
        finally:
            st.in_flight -= 1
            st.handlers.discard(task)

    async def answer(self, req: dict[str, Any], step: str, send, receive=None) -> None:
        st, cfg = self.state, self.state.config
        if step == "die":
            log.warning("stand-in exiting on cue (die)")
            os._exit(3)
        if step == "trickle":
            await self.trickle(req, send, receive)
            return
        if step in ("500", "503", "400", "429"):
            status = int(step)
            headers = {"retry-after": cfg.retry_after} if status in (429, 503) and cfg.retry_after is not None else {}
            msg = {
                500: "Internal Server Error (cue)",
                503: "Service Unavailable (cue)",
                400: "Bad request (cue)",
                429: "Too Many Requests (cue)",
            }[status]
            raise HTTPError(status, msg, "BadRequestError" if status == 400 else "ServerError", headers=headers)
        content, finish = make_answer(
            "ok" if step.startswith("slow:") or step in ("drop", "overcount") else step,
            req["sha"],
            req["width"],
            req["height"],
            req["max_tokens"],
            req["ignore_eos"],
            cfg.huge_chars,
        )
        completion_tokens = (
            req["max_tokens"] if finish == "length" else max(1, math.ceil(len(content) / CHARS_PER_TOKEN))
        )
        if step == "overcount":
            completion_tokens = req["max_tokens"] + 1000
        usage = {
            "prompt_tokens": req["prompt_tokens"],
            "completion_tokens": completion_tokens,
            "total_tokens": req["prompt_tokens"] + completion_tokens,
        }
        extra_delay = float(step[5:]) if step.startswith("slow:") else 0.0
        rid = "chatcmpl-" + uuid.uuid4().hex
        created = int(time.time())
        await st.hold()
        await st.acquire()
        try:
            if cfg.delay_s or extra_delay:
                await asyncio.sleep(cfg.delay_s + extra_delay)
            if req["stream"]:
                await self.stream(req, step, send, content, finish, usage, rid, created)
            else:
                n_chunks = math.ceil(len(content) / max(1, cfg.chunk_chars))
                if cfg.token_delay_s:
                    await asyncio.sleep(cfg.token_delay_s * n_chunks)
                payload = json.dumps(
                    {
                        "id": rid,
                        "object": "chat.completion",
                        "created": created,
                        "model": cfg.model,
                        "choices": [
                            {
                                "index": 0,
                                "message": {
                                    "role": "assistant",
                                    "content": content,
                                    "reasoning_content": None,
                                    "tool_calls": [],
                                },
                                "logprobs": None,
                                "finish_reason": finish,
                                "stop_reason": None,
                            }
                        ],
                        "usage": usage,
                        "prompt_logprobs": None,
                    }
                ).encode()
                if step == "drop":
                    await send(
                        {
                            "type": "http.response.start",
                            "status": 200,
                            "headers": [
                                (b"content-type", b"application/json"),
                                (b"content-length", str(len(payload)).encode()),
                            ],
                        }
                    )
                    await send({"type": "http.response.body", "body": payload[: len(payload) // 2], "more_body": True})
                    raise Dropped("connection dropped on cue")
                await respond(send, 200, payload)
            st.completed += 1
            st.prompt_tokens_total += usage["prompt_tokens"]
            st.generation_tokens_total += usage["completion_tokens"]
        finally:
            await st.release()

    async def trickle(self, req: dict[str, Any], send, receive) -> None:
        """An answer that never ends: a piece every trickle_s seconds until the client hangs up."""
        cfg = self.state.config
        gone = asyncio.ensure_future(_disconnected(receive)) if receive is not None else asyncio.Future()
        stream = req["stream"]
        ctype = b"text/event-stream; charset=utf-8" if stream else b"application/json"
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", ctype)]})
        if not stream:
            await send(
                {"type": "http.response.body", "body": b'{"choices": [{"message": {"content": "', "more_body": True}
            )
        try:
            i = 0
            while not gone.done():
                i += 1
                if stream:
                    choice = {"index": 0, "delta": {"content": f"word{i} "}, "finish_reason": None}
                    piece = f'data: {{"object": "chat.completion.chunk", "choices": [{json.dumps(choice)}]}}\n\n'
                else:
                    piece = "abcdefghij"[i % 10]
                await send({"type": "http.response.body", "body": piece.encode(), "more_body": True})
                await asyncio.wait([gone], timeout=cfg.trickle_s)
        finally:
            gone.cancel()

    async def stream(self, req, step, send, content, finish, usage, rid, created) -> None:
        cfg = self.state.config
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-type", b"text/event-stream; charset=utf-8"), (b"cache-control", b"no-cache")],
            }
        )
        head = json.dumps({"id": rid, "object": "chat.completion.chunk", "created": created, "model": cfg.model})[:-1]

        def event(delta: dict, finish_reason: str | None = None) -> bytes:
            choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}
            if finish_reason is not None:
                choice["stop_reason"] = None
            return (f'data: {head}, "choices": [{json.dumps(choice)}]}}\n\n').encode()

        events = [event({"role": "assistant", "content": ""})]
        size = 65536 if step == "huge" else max(1, cfg.chunk_chars)
        pieces = [content[i : i + size] for i in range(0, len(content), size)]
        events += [event({"content": p}) for p in pieces]
        events.append(event({}, finish))
        if req["include_usage"]:
            events.append((f'data: {head}, "choices": [], "usage": {json.dumps(usage)}}}\n\n').encode())
        events.append(b"data: [DONE]\n\n")
        drop_at = len(events) // 2 if step == "drop" else None
        if cfg.token_delay_s:
            for i, ev in enumerate(events):
                if drop_at is not None and i == drop_at:
                    raise Dropped("connection dropped on cue")
                await send({"type": "http.response.body", "body": ev, "more_body": True})
                if 0 < i < len(pieces) + 1:
                    await asyncio.sleep(cfg.token_delay_s)
        else:
            if drop_at is not None:
                await send({"type": "http.response.body", "body": b"".join(events[:drop_at]), "more_body": True})
                raise Dropped("connection dropped on cue")
            for i in range(0, len(events), 64):
                await send({"type": "http.response.body", "body": b"".join(events[i : i + 64]), "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})


async def _disconnected(receive) -> None:
    """Returns when the client hangs up (the request body already read)."""
    while (await receive())["type"] != "http.disconnect":
        pass


async def _read_body(receive) -> bytes:
    body = await read_body(receive)
    if body is None:
        raise HTTPError(400, "client disconnected")
    return body


def serve(host: str, port: int, config: StandInConfig, announce=None) -> None:
    """Run the server in this process until killed. `announce(port)` is called once it listens."""
    import uvicorn

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(2048)
    sock.set_inheritable(True)
    actual = sock.getsockname()[1]
    ucfg = uvicorn.Config(
        App(config), log_level="warning", access_log=False, lifespan="on", timeout_keep_alive=5, backlog=2048
    )
    server = uvicorn.Server(ucfg)

    async def main():
        task = asyncio.create_task(server.serve(sockets=[sock]))
        while not server.started and not task.done():
            await asyncio.sleep(0.01)
        if announce:
            announce(actual)
        await task

    asyncio.run(main())


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m tests.fakes.standin", description="stand-in vLLM server")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=8000, help="0 = any free port (printed on stdout)")
    ap.add_argument("--config", default="{}", help="initial config as JSON (see StandInConfig)")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    config = StandInConfig.model_validate(json.loads(args.config))

    def announce(port: int) -> None:
        print(f"STANDIN_PORT={port}", flush=True)

    serve(args.host, args.port, config, announce)


# ------------------------------------------------------------------------------ test-side handle


class StandIn:
    """A running stand-in process: base URL, control, stats, stop."""

    def __init__(self, proc: subprocess.Popen, port: int, host: str = "127.0.0.1", log_path: str | None = None):
        self.proc, self.port, self.host, self.log_path = proc, port, host, log_path
        self.root = f"http://{host}:{port}"
        self.url = self.root + "/v1"

    def _request(self, method: str, path: str, payload: dict | None = None) -> Any:
        import httpx

        r = httpx.request(method, self.root + path, json=payload, timeout=30)
        if r.status_code != 200:
            raise RuntimeError(f"stand-in {method} {path} answered {r.status_code}: {r.text}")
        return r.json()

    def control(self, **cfg: Any) -> dict:
        """Set config keys (others keep their values); reset=True first restores the defaults and clears stats."""
        return self._request("POST", "/_control", cfg)

    def reset(self, **cfg: Any) -> dict:
        return self.control(reset=True, **cfg)

    def stats(self) -> dict:
        return self._request("GET", "/_stats")

    def metrics(self) -> str:
        import httpx

        return httpx.get(self.root + "/metrics", timeout=30).text

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=5)

    def __enter__(self) -> StandIn:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


def start_standin(
    host: str = "127.0.0.1", port: int = 0, timeout: float = 30.0, log_path: str | None = None, **config: Any
) -> StandIn:
    """Start a stand-in process on a free port and wait until /health answers."""
    import httpx

    StandInConfig.model_validate(config)  # fail here, not in the child
    root = str(Path(__file__).resolve().parents[2])
    env = {**os.environ, "PYTHONPATH": root + os.pathsep + os.environ.get("PYTHONPATH", "")}
    stderr = open(log_path, "ab") if log_path else subprocess.DEVNULL
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tests.fakes.standin",
            "--host",
            host,
            "--port",
            str(port),
            "--config",
            json.dumps(config),
        ],
        cwd=root,
        env=env,
        stdout=subprocess.PIPE,
        stderr=stderr,
        text=True,
    )
    if log_path:
        stderr.close()
    line = proc.stdout.readline()  # blocks until the child announces its port (or dies)
    if not line.startswith("STANDIN_PORT="):
        proc.kill()
        raise RuntimeError(f"stand-in server did not start (exit code {proc.wait()}, said {line!r})")
    port = int(line.strip().split("=", 1)[1])
    handle = StandIn(proc, port, host, log_path)
    deadline = time.monotonic() + timeout
    while True:
        try:
            if httpx.get(handle.root + "/health", timeout=2).status_code == 200:
                return handle
        except httpx.HTTPError:
            pass
        if time.monotonic() > deadline or proc.poll() is not None:
            handle.stop()
            raise RuntimeError("stand-in server did not answer /health")
        time.sleep(0.05)


if __name__ == "__main__":
    main()
