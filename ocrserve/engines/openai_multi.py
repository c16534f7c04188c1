"""Several OpenAI-compatible servers (vLLM data-parallel replicas) as one `openai` engine.

A page goes to the least busy server whose circuit breaker lets it; a failed request is tried again on
another one at once (openai_page.py). A server down before the run is a warning: the run goes on with
the others and the down one gets pages again once a probe answers; every server down is an error."""

from __future__ import annotations

import asyncio
import logging

from ocrserve.engines.base import DeltaCallback, Engine, EngineError, EngineResult, PageInput
from ocrserve.engines.openai import OpenAIEngine
from ocrserve.engines.openai_models import Unreachable
from ocrserve.engines.openai_page import ocr_page

log = logging.getLogger(__name__)


class MultiServerEngine(Engine):
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
        return await ocr_page(self.engines, page, on_delta, self._in_flight)

    async def check(self) -> bool:
        results = await asyncio.gather(*(e.check() for e in self.engines), return_exceptions=True)
        return any(r is True for r in results)

    async def preflight(self) -> None:
        """The replicas that answer must serve one model (a key refused, another model: an error); one
        that does not answer is a warning, out of use until a probe answers; none answering is an error."""
        results = await asyncio.gather(*(e.preflight() for e in self.engines), return_exceptions=True)
        errors = [str(r) for r in results if isinstance(r, BaseException) and not isinstance(r, Unreachable)]
        if errors:
            raise EngineError("; ".join(errors))
        live = [e for e, r in zip(self.engines, results, strict=True) if not isinstance(r, BaseException)]
        if not live:
            raise EngineError("no server answers: " + "; ".join(str(r) for r in results))
        names = sorted({e.profile.name for e in live})
        if len(names) > 1:
            raise EngineError(f"the servers serve different models ({', '.join(names)}): give one model's replicas")
        self.profile = live[0].profile
        for e, r in zip(self.engines, results, strict=True):
            if isinstance(r, Unreachable):
                log.warning("%s; going on with the other servers, and with this one once it answers", r)
                e.breaker.trip(str(r))
                if e.profile is not self.profile:
                    e.set_profile(self.profile)

    async def aclose(self) -> None:
        await asyncio.gather(*(e.aclose() for e in self.engines), return_exceptions=True)
