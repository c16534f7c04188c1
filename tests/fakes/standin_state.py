"""The stand-in vLLM server's state (its config, statistics, plans, the concurrency gate) and the check of a
chat-completions request as vLLM and Chandra expect it, with its HTTP errors."""

from __future__ import annotations

import asyncio
import base64
import binascii
import hashlib
import io
import json
from collections import deque
from typing import Any

from tests.fakes.standin_config import PATCH, PROMPT_TEXT_TOKENS, StandInConfig

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
