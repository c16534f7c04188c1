"""A page's streamed text, handed to its `on_delta` callback (every streaming engine's convention).

Pieces go to the callback as they come; before a retried attempt's pieces comes an empty delta,
"discard the text so far, the answer starts over", if the last attempt sent any (a consumer that
only appends is unaffected). A failing callback gets no more deltas and does not fail the page.

`Deltas` is fed on the event loop (the HTTP engine); `ThreadDeltas` is fed from a worker thread
(the in-process generator) and delivers on the loop, in order.
"""

from __future__ import annotations

import asyncio
import inspect
import logging

from ocrserve.engines.base import DeltaCallback

log = logging.getLogger(__name__)


class Deltas:
    """The page's delta callback: pieces as they come, "" before a retried attempt's pieces."""

    def __init__(self, cb: DeltaCallback) -> None:
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
        """A new attempt starts: an empty delta if the last one sent text."""
        if self.sent:
            await self.send("")
            self.sent = False


class ThreadDeltas(Deltas):
    """Deltas fed from a worker thread (`sink`, `restart`), delivered on the event loop in order by a pump
    task; `close()` (on the loop) waits until every piece scheduled before it is delivered."""

    def __init__(self, loop: asyncio.AbstractEventLoop, cb: DeltaCallback) -> None:
        super().__init__(cb)
        self.loop = loop
        self.queue: asyncio.Queue = asyncio.Queue()
        self.queued = False  # text queued since the last reset
        self.task = loop.create_task(self._pump())

    def sink(self, text: str) -> None:
        """Called from the worker thread with new text."""
        self.loop.call_soon_threadsafe(self._put, text)

    def restart(self) -> None:
        """Called from the worker thread: the attempt's text so far is void (after the pieces already sent)."""
        self.loop.call_soon_threadsafe(self.reset_now)

    def _put(self, text: str) -> None:
        self.queued = True
        self.queue.put_nowait(text)

    def reset_now(self) -> None:
        """On the loop: a new attempt starts (an empty delta, queued after the pieces before it)."""
        if self.queued:
            self.queue.put_nowait("")
            self.queued = False

    async def close(self) -> None:
        self.queue.put_nowait(None)
        await self.task

    async def _pump(self) -> None:
        while (piece := await self.queue.get()) is not None:
            await self.send(piece)
