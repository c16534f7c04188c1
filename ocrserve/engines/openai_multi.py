"""Several OpenAI-compatible servers (vLLM data-parallel replicas) as one `openai` engine."""

from __future__ import annotations

import asyncio

from ocrserve.engines.base import DeltaCallback, Engine, EngineError, EngineResult, PageInput
from ocrserve.engines.openai import OpenAIEngine


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
        names = sorted({e.profile.name for e in self.engines})
        if len(names) > 1:
            raise EngineError(f"the servers serve different models ({', '.join(names)}): give one model's replicas")
        self.profile = self.engines[0].profile

    async def aclose(self) -> None:
        await asyncio.gather(*(e.aclose() for e in self.engines), return_exceptions=True)
