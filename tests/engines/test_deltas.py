"""engines/deltas.py: the streamed-delta accumulator of the openai (loop-fed) and hf (thread-fed) engines."""

from __future__ import annotations

import asyncio
import threading

from ocrserve.engines.deltas import Deltas, ThreadDeltas


async def test_pieces_then_an_empty_delta_before_a_retried_attempt():
    got: list[str] = []
    d = Deltas(got.append)  # a plain (sync) callback
    await d.reset()  # nothing sent yet: no empty delta
    await d.send("ab")
    await d.send("c")
    await d.reset()  # a retry after text went out: ""
    await d.reset()  # nothing new since: no second ""
    await d.send("x")
    assert got == ["ab", "c", "", "x"]


async def test_an_async_callback_is_awaited():
    got: list[str] = []

    async def cb(piece: str) -> None:
        await asyncio.sleep(0)
        got.append(piece)

    d = Deltas(cb)
    await d.send("p")
    assert got == ["p"]


async def test_a_failing_callback_gets_nothing_more_and_raises_nothing():
    calls: list[str] = []

    def cb(piece: str) -> None:
        calls.append(piece)
        raise RuntimeError("consumer gone")

    d = Deltas(cb)
    await d.send("a")
    await d.send("b")
    await d.reset()
    assert calls == ["a"] and d.cb is None


async def test_thread_fed_deltas_arrive_on_the_loop_in_order():
    loop = asyncio.get_running_loop()
    got: list[tuple[str, bool]] = []
    main = threading.get_ident()
    d = ThreadDeltas(loop, lambda piece: got.append((piece, threading.get_ident() == main)))
    d.reset_now()  # first attempt: nothing sent, no ""

    def worker() -> None:  # as the generate() thread: text, out of memory (restart), text again
        d.sink("one ")
        d.sink("two")
        d.restart()
        d.sink("three")

    t = threading.Thread(target=worker)
    t.start()
    await asyncio.to_thread(t.join)
    d.reset_now()  # a retried attempt after "three": ""
    d.reset_now()
    await d.close()
    assert [p for p, _ in got] == ["one ", "two", "", "three", ""]
    assert all(on_loop for _, on_loop in got)


async def test_thread_fed_deltas_survive_a_failing_callback():
    loop = asyncio.get_running_loop()
    calls: list[str] = []

    def cb(piece: str) -> None:
        calls.append(piece)
        raise ValueError("bad consumer")

    d = ThreadDeltas(loop, cb)
    await asyncio.to_thread(lambda: (d.sink("a"), d.sink("b")))  # from a worker thread, as generate() does
    await d.close()
    assert calls == ["a"]
