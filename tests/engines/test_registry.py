"""The engine registry (create_engine: names, options) and the Engine base class's defaults."""

from __future__ import annotations

import asyncio

import pytest

from ocrserve.engines import ENGINE_NAMES, Engine, EngineError, EngineResult, PageInput, create_engine, engine_class
from ocrserve.engines.base import PIPELINE_OPTIONS, check_options, engine_options
from ocrserve.engines.lite.engine import LiteEngine
from ocrserve.engines.openai import OpenAIEngine
from ocrserve.engines.vllm import VLLMEngine
from ocrserve.profiles import load_profile
from PIL import Image

PROFILE = load_profile("chandra-1")


class _FakeLLM:
    def chat(self, convs, sampling_params=None, use_tqdm=False):  # pragma: no cover - never called here
        raise AssertionError("not called")


def _page(i: int = 0) -> PageInput:
    return PageInput("d", i, image=Image.new("RGB", (8, 8), "white"))


# ---- the registry -------------------------------------------------------------------------------------


def test_every_engine_name_is_registered():
    assert ENGINE_NAMES == ("lite", "openai", "hf", "vllm")
    assert engine_class("lite") is LiteEngine and engine_class("openai") is OpenAIEngine
    assert engine_class("vllm") is VLLMEngine
    with pytest.raises(EngineError, match="unknown engine 'nope': use one of lite, openai, hf, vllm"):
        create_engine("nope", PROFILE)


def test_vllm_is_built_by_create_engine():
    eng = create_engine("vllm", PROFILE, llm=_FakeLLM(), sampling_factory=dict, max_tokens=9)
    assert isinstance(eng, VLLMEngine) and eng.batched and eng.max_tokens == 9


def test_an_option_the_engine_does_not_take_is_an_error_naming_it():
    with pytest.raises(EngineError, match=r"engine 'lite' does not take option\(s\) 'checkpoint'"):
        create_engine("lite", PROFILE, checkpoint="some/model")
    with pytest.raises(EngineError, match=r"engine 'openai' does not take option\(s\) 'device'"):
        create_engine("openai", PROFILE, server="h:8000", device="cpu")
    with pytest.raises(EngineError, match=r"engine 'lite' does not take option\(s\) 'api_key', 'device'"):
        create_engine("lite", PROFILE, device="cpu", api_key="k")


def test_pipeline_options_and_unset_options_are_dropped_where_not_taken():
    # the pipeline passes concurrency (Converter) and server (Ray) to whichever engine it builds
    assert PIPELINE_OPTIONS == {"concurrency", "server"}
    assert check_options("lite", LiteEngine, {"concurrency": 4, "server": "h:1", "workers": 2, "ocr": None}) == {
        "workers": 2}
    eng = create_engine("lite", PROFILE, concurrency=4, server="h:1", workers=3, timeout=None)
    try:
        assert isinstance(eng, LiteEngine) and eng.workers == 3
    finally:
        asyncio.run(eng.aclose())
    eng = create_engine("openai", PROFILE, server="h:8000", concurrency=5, api_key=None)
    assert isinstance(eng, OpenAIEngine) and eng.capacity() == 5


def test_each_engine_declares_its_options_by_its_constructor():
    assert engine_options(LiteEngine) == {"workers", "warm", "timeout", "ocr", "trust_invisible"}
    assert {"server", "api_key", "concurrency", "max_tokens", "ignore_eos"} <= engine_options(OpenAIEngine)
    assert "device" not in engine_options(OpenAIEngine)

    class Wrapper(Engine):  # a constructor that takes anything (a test double, a wrapper) gets everything
        def __init__(self, profile, settings=None, **options):
            self.options = options

        async def ocr(self, page, *, on_delta=None):  # pragma: no cover
            raise AssertionError

    assert engine_options(Wrapper) is None
    assert check_options("w", Wrapper, {"x": 1, "y": None}) == {"x": 1}


def test_the_ray_engine_spec_builds_through_create_engine():
    from ocrserve.pipeline.ray_stages import EngineSpec
    from ocrserve.settings import Settings

    spec = EngineSpec(name="vllm", model=PROFILE, settings=Settings(),
                      options={"llm": _FakeLLM(), "sampling_factory": dict, "concurrency": 8})
    assert isinstance(spec.build(PROFILE), VLLMEngine)
    bad = EngineSpec(name="lite", model=PROFILE, settings=Settings(), options={"checkpoint": "x"})
    with pytest.raises(EngineError, match="'checkpoint'"):
        bad.build(PROFILE)


# ---- the base class ----------------------------------------------------------------------------------


class _Minimal(Engine):
    """Only what an engine must write: ocr."""

    name = "minimal"

    def __init__(self, expect: int) -> None:
        self.profile = PROFILE
        self.expect = expect
        self.entered: list[int] = []
        self.all_in = asyncio.Event()

    async def ocr(self, page, *, on_delta=None):
        self.entered.append(page.index)
        if len(self.entered) == self.expect:
            self.all_in.set()
        await self.all_in.wait()  # returns only once every page of the batch is in flight at once
        return EngineResult(raw=f"page {page.index}", engine=self.name)


def test_ocr_is_the_one_method_an_engine_must_have():
    class NoOcr(Engine):
        pass

    with pytest.raises(TypeError, match="abstract"):
        NoOcr()


async def test_the_default_methods():
    eng = _Minimal(expect=1)
    assert eng.capacity() == 1 and eng.batched is False
    assert await eng.preflight() is None
    assert await eng.check() is True
    assert await eng.aclose() is None


async def test_default_ocr_batch_runs_the_pages_concurrently_in_order():
    eng = _Minimal(expect=3)
    pages = [_page(i) for i in (2, 0, 1)]
    results = await asyncio.wait_for(eng.ocr_batch(pages), 30)  # one at a time would never finish
    assert [r.raw for r in results] == ["page 2", "page 0", "page 1"]
    assert sorted(eng.entered) == [0, 1, 2]


def test_every_engine_is_an_engine():
    for name in ENGINE_NAMES:
        assert issubclass(engine_class(name), Engine)
    from ocrserve.engines.openai_multi import MultiServerEngine

    assert issubclass(MultiServerEngine, Engine)
