"""The fallback rule shared by the local pipeline and the Ray stages: a page the model engine gave
up on goes to the lite engine; it is then `fallback` with the model's error kept, else `failed`."""

from __future__ import annotations

from typing import Awaitable, Callable

from .engines.base import Engine, EngineResult, PageInput


async def with_fallback(
    res: EngineResult, page: PageInput, *, engine_name: str, enabled: bool,
    get_fallback: Callable[[], Awaitable[Engine]],
) -> tuple[EngineResult, str, str | None]:
    """(result, status ok|fallback|failed, the model's error for a rescued or failed page)."""
    if res.ok:
        return res, "ok", None
    if enabled and engine_name != "lite":
        fb = await get_fallback()
        try:
            res2 = await fb.ocr(page)
        except Exception as e:  # noqa: BLE001 - the fallback never loses the page either
            res2 = EngineResult(ok=False, engine="lite", error=f"fallback error: {e!r}")
        if res2.ok:
            res2.attempts += res.attempts
            return res2, "fallback", res.error
        res.error = f"{res.error}; fallback failed: {res2.error}"
    return res, "failed", res.error
