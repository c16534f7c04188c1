"""One page through the openai engine: the ladder of attempts over one server or several replicas.

Each attempt goes to a server whose circuit breaker lets it (openai_breaker.py), the least busy one;
after a failed request the next attempt goes to another server when one is ready (at once, no
backoff), else to the same after the backoff. When no server is ready (every breaker open) the page
fails at once with the reason, so the fallback takes it without a ladder of its own.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ocrserve.engines.base import DeltaCallback, EngineResult, PageInput
from ocrserve.engines.chat import b64encode, image_mime
from ocrserve.engines.deltas import Deltas
from ocrserve.engines.openai_http import Fatal, Retry, png_size
from ocrserve.engines.policy import Ladder

if TYPE_CHECKING:
    from ocrserve.engines.openai import OpenAIEngine

log = logging.getLogger(__name__)


def pick(engines: Sequence[OpenAIEngine], in_flight: list[int], avoid: int | None) -> int | None:
    """The ready server with the fewest pages in flight for its capacity (not `avoid` when another is
    ready), or None when every breaker is open."""
    ready = [k for k, e in enumerate(engines) if e.breaker.ready()]
    if avoid in ready and len(ready) > 1:
        ready.remove(avoid)
    if not ready:
        return None
    return min(ready, key=lambda k: in_flight[k] / max(1, engines[k].capacity()))


def all_down(engines: Sequence[OpenAIEngine]) -> str:
    whys = "; ".join(e.breaker.why() for e in engines)
    return ("every server is down: " if len(engines) > 1 else "") + whys


async def ocr_page(
    engines: Sequence[OpenAIEngine],
    page: PageInput,
    on_delta: DeltaCallback | None = None,
    in_flight: list[int] | None = None,
) -> EngineResult:
    """The page's result from these servers (replicas of one model); never raises."""
    first = engines[0]
    in_flight = in_flight if in_flight is not None else [0] * len(engines)
    ladder = Ladder(first.name, first.profile, ignore_eos=first.ignore_eos, max_retries=first.max_retries)
    failures = 0
    limits: dict[int, int] = {}  # max_tokens lowered for a server's context, by server
    stream = first.stream or on_delta is not None
    deltas = Deltas(on_delta) if on_delta is not None else None
    try:
        data = page.png_bytes()
        mime = image_mime(data)
        size = page.image_size or png_size(data)
        b64 = b64encode(data)
    except Exception as e:  # noqa: BLE001 - a page we cannot even encode fails, never raises
        return ladder.failed(f"cannot encode the page image: {e}")
    avoid: int | None = None
    while True:
        i = pick(engines, in_flight, avoid)
        if i is None:
            return ladder.failed(all_down(engines))
        eng = engines[i]
        if len(engines) > 1:
            ladder.extra["server"] = eng.base_url
        attempts = ladder.begin()
        in_flight[i] += 1
        try:
            ans, max_tokens = await eng.attempt(ladder, size, mime, b64, limits.get(i), stream, deltas)
        except Retry as e:
            failures += 1
            ladder.note(e.reason if len(engines) == 1 else f"{eng.base_url}: {e.reason}")
            if failures > first.max_connection_retries:
                where = ", ".join(x.base_url for x in engines)
                return ladder.failed(
                    f"gave up after {attempts} attempts ({failures} failed requests to {where}); last: {e.reason}"
                )
            avoid = i
            other = pick(engines, in_flight, avoid)
            if other is not None and other != i:
                log.info(
                    "page %s/%d: %s: %s; trying %s",
                    page.doc_id,
                    page.index,
                    eng.base_url,
                    e.reason,
                    engines[other].base_url,
                )
                continue
            delay = first.backoff(failures, e.retry_after)
            log.info("page %s/%d: %s; retrying in %.2f s", page.doc_id, page.index, e.reason, delay)
            await asyncio.sleep(delay)
            continue
        except Fatal as e:
            ladder.note(e.reason)
            fixed = eng.fix_context(e, size) if e.status == 400 and i not in limits else None
            if fixed is not None:
                limits[i] = fixed
                log.info(
                    "page %s/%d: max_tokens lowered to %d for the server's context", page.doc_id, page.index, fixed
                )
                continue
            return ladder.failed(e.reason)
        finally:
            in_flight[i] -= 1
        verdict = ladder.judge(ans.content, ans.finish_reason, max_tokens)
        if verdict == "ok":
            return ladder.answer(ans.content, ans.finish_reason, ans.prompt_tokens, ans.completion_tokens)
        if verdict == "give_up":
            return ladder.gave_up(ans.content, ans.prompt_tokens, ans.completion_tokens)
        log.info("page %s/%d: %s; retrying with retry sampling", page.doc_id, page.index, ladder.last_problem)
