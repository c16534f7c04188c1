"""The stand-in vLLM server's ASGI application (tests/fakes/standin.py runs it): the routes, chat completions
answered as JSON or SSE on the cues of its plan, the control and statistics endpoints, vLLM's metrics."""

from __future__ import annotations

import asyncio
import json
import logging
import math
import os
import time
import uuid
from typing import Any

from ocrserve.vllm.router import read_body, respond
from tests.fakes.standin_answers import make_answer
from tests.fakes.standin_config import CHARS_PER_TOKEN, StandInConfig
from tests.fakes.standin_state import Dropped, HTTPError, State, validate_request

log = logging.getLogger("standin")


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
