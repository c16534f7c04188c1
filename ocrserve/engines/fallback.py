"""Fallback as a wrapper engine: the pages an engine cannot read go to another engine (lite).

`FallbackEngine(primary, make_fallback)` is the primary engine, with `make_fallback()` (awaited when a
page first needs it; the caller owns and closes what it makes) for its failures:
- an ok answer is the primary's; when it still looped after its last retry (finish_reason "loop": the
  text before the loop is kept), the fallback reads the page too and its raw answer goes along in
  `extra["fill_raw"]` (the pipeline fills the page in where the model gave nothing: pipeline/page.py);
- a page the primary gave up on (ok=False) is the fallback's answer, marked `rescued`, with the
  primary's error and its attempts added; when the fallback fails too, the primary's result with both
  errors;
- an exception from the primary (a bug: engines answer ok=False) is a failed page like any other.
Whether an engine is worth wrapping is its trait `model_engine` (lite is not wrapped by itself).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from ocrserve.engines.base import DeltaCallback, Engine, EngineResult, PageInput, engine_error
from ocrserve.profiles import Profile

log = logging.getLogger(__name__)


class FallbackEngine(Engine):
    """An engine whose failed pages are rescued by a fallback engine (see the module's docstring)."""

    def __init__(self, primary: Engine, make_fallback: Callable[[], Awaitable[Engine]]) -> None:
        self.inner = primary
        self.make_fallback = make_fallback
        self.name = primary.name
        self.batched = primary.batched
        self.model_engine = primary.innermost().model_engine

    @property
    def profile(self) -> Profile:  # the primary's, also once its preflight settled on the served one
        return self.inner.profile

    @profile.setter
    def profile(self, value: Profile) -> None:
        self.inner.profile = value

    def capacity(self) -> int:
        return self.inner.capacity()

    async def preflight(self) -> None:
        await self.inner.preflight()

    async def check(self) -> bool:
        return await self.inner.check()

    async def aclose(self) -> None:
        await self.inner.aclose()

    async def ocr(self, page: PageInput, *, on_delta: DeltaCallback | None = None) -> EngineResult:
        try:
            res = await self.inner.ocr(page, on_delta=on_delta)
        except Exception as e:  # an engine bug must not lose the page (logged)
            log.exception("engine %s raised on %s page %d", self.name, page.doc_id, page.index + 1)
            res = engine_error(self.name, e)
        return await self.rescue(page, res)

    async def ocr_batch(self, pages: list[PageInput]) -> list[EngineResult]:
        try:
            results = await self.inner.ocr_batch(pages)
        except Exception as e:
            log.exception("engine %s raised on a batch", self.name)
            results = [engine_error(self.name, e) for _ in pages]
        return list(await asyncio.gather(*(self.rescue(p, r) for p, r in zip(pages, results, strict=True))))

    async def rescue(self, page: PageInput, res: EngineResult) -> EngineResult:
        """The page's result once the fallback had its say (see the module's docstring)."""
        if res.ok:
            if res.finish_reason == "loop":
                fill = await self._fallback_ocr(page)
                if fill.ok:
                    res.extra["fill_raw"] = fill.raw
            return res
        rescue = await self._fallback_ocr(page)
        if rescue.ok:
            rescue.attempts += res.attempts
            rescue.rescued, rescue.error = True, res.error
            return rescue
        res.error = f"{res.error}; fallback failed: {rescue.error}"
        return res

    async def _fallback_ocr(self, page: PageInput) -> EngineResult:
        try:
            fallback = await self.make_fallback()
            return await fallback.ocr(page)
        except Exception as e:  # noqa: BLE001 - the fallback never loses the page either
            return EngineResult(ok=False, error=f"fallback error: {e!r}")
