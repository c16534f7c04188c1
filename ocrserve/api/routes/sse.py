"""Serving one conversion: the slot it holds, its Server-Sent Events answer, a client that goes away."""

from __future__ import annotations

import asyncio
import json
import shutil
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from fastapi import Request
from fastapi.responses import StreamingResponse

from ocrserve.api.limits import KeyLimiter


def sse(kind: str, data: Any) -> bytes:
    return f"event: {kind}\ndata: {json.dumps(data, separators=(',', ':'))}\n\n".encode()


class Hold:
    """What one /v1/convert request holds: a concurrency slot of its key and its upload folder.

    Given back exactly once, synchronously (no await: it must run even under a cancellation).
    """

    def __init__(self, limiter: KeyLimiter, who: str, work: Path) -> None:
        self.limiter, self.who, self.work = limiter, who, work
        self.held = True

    def release(self) -> None:
        if self.held:
            self.held = False
            self.limiter.release(self.who)
            shutil.rmtree(self.work, ignore_errors=True)

    def release_cb(self, _task: asyncio.Task) -> None:
        self.release()


async def _wait_disconnect(request: Request) -> None:
    """Returns when the client has gone away (the body is read already: the next message is the disconnect)."""
    try:
        while (await request.receive())["type"] != "http.disconnect":
            pass
    except Exception:  # noqa: BLE001 - a receive that fails means the connection is gone too
        return


async def done_unless_gone(task: asyncio.Task, request: Request) -> bool:
    """Wait for task; False (task left running, for the caller to cancel) when the client goes away first."""
    gone = asyncio.create_task(_wait_disconnect(request))
    try:
        await asyncio.wait((task, gone), return_when=asyncio.FIRST_COMPLETED)
    finally:
        gone.cancel()
    return task.done()


class EventStream(StreamingResponse):
    """The SSE answer of one conversion, which runs in its own task while the response is sent.

    However the response ends (the conversion done, the client gone, the server stopping) the task is
    cancelled, and the hold is given back when the task has stopped: no await stands between a
    cancellation and that (Starlette cancels the response on disconnect, and would cancel such an await too).

    A client that does not read is dropped, not buffered for: events wait (encoded) for the client up to
    `max_buffer` bytes (one event more, so a large `done` always fits after the others were read); the
    event that finds more than that waiting stops the conversion and ends the answer unfinished, so the
    server closes the connection (the conversion cannot be paused: the engine's batch goes on).
    """

    def __init__(
        self,
        run: Callable[[Callable[[str, Any], None]], Awaitable[None]],
        hold: Hold,
        max_buffer: int = 8 * 1024 * 1024,
        on_drop: Callable[[int], None] | None = None,
    ) -> None:
        self._run, self._hold = run, hold
        self._queue: asyncio.Queue[bytes | None] = asyncio.Queue()
        self._buffered = 0  # bytes of events waiting for the client
        self._max, self._on_drop = max(1, int(max_buffer)), on_drop
        self._dropped = asyncio.Event()
        self._task: asyncio.Task | None = None
        super().__init__(
            self._events(),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
        )

    def _sink(self, kind: str, data: Any) -> None:
        if self._dropped.is_set():
            return
        if self._buffered > self._max:  # the client has not read what came before: dropped
            self._dropped.set()
            if self._on_drop is not None:
                self._on_drop(self._buffered)
            if self._task is not None:
                self._task.cancel()
            return
        event = sse(kind, data)
        self._buffered += len(event)
        self._queue.put_nowait(event)

    async def _convert(self) -> None:
        try:
            await self._run(self._sink)
        finally:
            self._queue.put_nowait(None)

    async def _events(self):
        yield b": ocrserve\n\n"
        while True:
            try:
                item = await asyncio.wait_for(self._queue.get(), timeout=15)
            except TimeoutError:
                yield b": ping\n\n"
                continue
            if item is None:
                return
            self._buffered -= len(item)
            yield item

    async def __call__(self, scope, receive, send) -> None:
        task = self._task = asyncio.create_task(self._convert())
        task.add_done_callback(self._hold.release_cb)
        answer = asyncio.create_task(super().__call__(scope, receive, send))
        dropped = asyncio.create_task(self._dropped.wait())
        try:
            await asyncio.wait((answer, dropped), return_when=asyncio.FIRST_COMPLETED)
            if answer.done():
                answer.result()  # its error, if any, goes on up
            # else: dropped. The answer stops unfinished: the server closes the connection
        finally:
            for t in (answer, dropped, task):
                if not t.done():
                    t.cancel()
            await asyncio.gather(answer, dropped, return_exceptions=True)
