"""FallbackEngine: the wrapper that hands the pages an engine gives up on to the fallback (lite), and the
page status the pipeline reads from its result."""

from __future__ import annotations

import pytest
from PIL import Image

from ocrserve.engines import Engine, EngineResult, FallbackEngine, PageInput
from ocrserve.pipeline.page import page_status
from ocrserve.profiles import load_profile

PROFILE = load_profile("chandra-1")


class _Scripted(Engine):
    """Answers each page with the result its index maps to (an exception is raised)."""

    name = "model"

    def __init__(self, answers: dict[int, EngineResult | Exception], batched: bool = False) -> None:
        self.profile = PROFILE
        self.answers = answers
        self.batched = batched
        self.seen: list[int] = []
        self.closed = False

    def capacity(self) -> int:
        return 7

    async def ocr(self, page, *, on_delta=None):
        self.seen.append(page.index)
        a = self.answers[page.index]
        if isinstance(a, Exception):
            raise a
        return a

    async def aclose(self) -> None:
        self.closed = True


class _Lite(_Scripted):
    name = "lite"
    model_engine = False


def _page(i: int) -> PageInput:
    return PageInput("d", i, image=Image.new("RGB", (8, 8), "white"))


def _wrap(primary: Engine, fallback: Engine):
    made: list[Engine] = []

    async def make() -> Engine:
        made.append(fallback)
        return fallback

    return FallbackEngine(primary, make), made


def gave_up() -> EngineResult:
    return EngineResult(ok=False, engine="model", attempts=3, finish_reason="error", error="HTTP 400: refused")


async def test_an_ok_answer_is_the_primarys_and_the_fallback_is_never_made():
    eng, made = _wrap(_Scripted({0: EngineResult(raw="<p>a</p>", engine="model", finish_reason="stop")}), _Lite({}))
    res = await eng.ocr(_page(0))
    assert res.raw == "<p>a</p>" and not res.rescued and made == []
    assert page_status(res) == ("ok", None)


async def test_a_page_the_primary_gave_up_on_is_rescued_and_marked():
    lite = _Lite({0: EngineResult(raw="<p>lite</p>", engine="lite", finish_reason="stop")})
    eng, made = _wrap(_Scripted({0: gave_up()}), lite)
    res = await eng.ocr(_page(0))
    assert res.rescued and res.ok and res.engine == "lite" and res.raw == "<p>lite</p>"
    assert res.attempts == 4 and res.error == "HTTP 400: refused"  # the model's attempts and error kept
    assert page_status(res) == ("fallback", "HTTP 400: refused")
    assert made == [lite]


async def test_when_the_fallback_fails_too_the_page_fails_with_both_errors():
    lite = _Lite({0: EngineResult(ok=False, engine="lite", error="no text")})
    eng, _ = _wrap(_Scripted({0: gave_up()}), lite)
    res = await eng.ocr(_page(0))
    assert not res.ok and not res.rescued and res.engine == "model"
    assert page_status(res) == ("failed", "HTTP 400: refused; fallback failed: no text")


async def test_a_fallback_that_raises_or_cannot_be_made_fails_the_page_not_the_run():
    eng, _ = _wrap(_Scripted({0: EngineResult(ok=False, error="gave up")}), _Lite({0: RuntimeError("boom")}))
    res = await eng.ocr(_page(0))
    assert page_status(res)[0] == "failed" and "fallback error: RuntimeError('boom')" in res.error

    async def broken() -> Engine:
        raise OSError("no workers")

    res = await FallbackEngine(_Scripted({0: EngineResult(ok=False, error="gave up")}), broken).ocr(_page(0))
    assert page_status(res)[0] == "failed" and "no workers" in res.error


async def test_a_loop_keeps_the_models_text_and_brings_the_fallbacks_answer_along():
    looped = EngineResult(
        raw="<p>before the loop</p>",
        engine="model",
        finish_reason="loop",
        attempts=7,
        error="still looped after 6 retries",
    )
    eng, _ = _wrap(_Scripted({0: looped}), _Lite({0: EngineResult(raw="<p>lite</p>", engine="lite")}))
    res = await eng.ocr(_page(0))
    assert res is looped and res.raw == "<p>before the loop</p>" and res.extra["fill_raw"] == "<p>lite</p>"
    assert page_status(res) == ("ok", "still looped after 6 retries")
    # the fallback failing too: the page keeps the model's text alone
    eng, _ = _wrap(
        _Scripted({0: EngineResult(raw="x", finish_reason="loop", error="looped")}),
        _Lite({0: EngineResult(ok=False, error="no")}),
    )
    res = await eng.ocr(_page(0))
    assert "fill_raw" not in res.extra and page_status(res) == ("ok", "looped")


async def test_an_engine_that_raises_is_a_failed_page_and_rescued():
    eng, _ = _wrap(_Scripted({0: ValueError("bug")}), _Lite({0: EngineResult(raw="r", engine="lite")}))
    res = await eng.ocr(_page(0))
    assert res.rescued and page_status(res) == ("fallback", "engine error: ValueError('bug')")


class _Batched(_Scripted):
    async def ocr_batch(self, pages):
        self.seen.append(tuple(p.index for p in pages))
        return [await self.ocr(p) for p in pages]


async def test_a_batched_primary_keeps_its_batches_and_each_page_is_rescued_alone():
    primary = _Batched({0: EngineResult(raw="a"), 1: gave_up()}, batched=True)
    eng, _ = _wrap(primary, _Lite({1: EngineResult(raw="l1", engine="lite")}))
    assert eng.batched
    out = await eng.ocr_batch([_page(0), _page(1)])
    assert primary.seen[0] == (0, 1)  # one batch
    assert [(r.raw, page_status(r)[0]) for r in out] == [("a", "ok"), ("l1", "fallback")]
    # a batch that raises: each of its pages failed, then each rescued
    lite = _Lite({i: EngineResult(raw=f"l{i}", engine="lite") for i in range(2)})
    eng, _ = _wrap(_Batched({0: EngineResult(raw="a"), 1: RuntimeError("x")}, batched=True), lite)
    out = await eng.ocr_batch([_page(0), _page(1)])
    why = "engine error: RuntimeError('x')"
    assert [(r.raw, page_status(r)) for r in out] == [("l0", ("fallback", why)), ("l1", ("fallback", why))]


async def test_the_wrapper_stands_for_its_engine():
    primary = _Scripted({})
    eng, _ = _wrap(primary, _Lite({}))
    assert eng.name == "model" and eng.capacity() == 7 and eng.profile is PROFILE and eng.model_engine
    assert eng.innermost() is primary and FallbackEngine(eng, None).innermost() is primary  # type: ignore[arg-type]
    await eng.aclose()
    assert primary.closed  # the primary is the wrapper's; the fallback is its maker's to close
    assert await eng.check() is True and await eng.preflight() is None


@pytest.mark.parametrize(
    "res, want",
    [
        (EngineResult(ok=True, finish_reason="stop", error="a retried problem"), ("ok", None)),
        (EngineResult(ok=True, finish_reason="length"), ("ok", None)),
        (EngineResult(ok=False, error="e"), ("failed", "e")),
        (EngineResult(ok=True, rescued=True, error="model's"), ("fallback", "model's")),
    ],
)
def test_page_status(res, want):
    assert page_status(res) == want
