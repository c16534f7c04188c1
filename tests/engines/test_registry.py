"""The engine registry (engines by name, each class with its contract: options model, traits),
create_engine's option checks and Settings defaults, and the Engine base class's defaults."""

from __future__ import annotations

import asyncio
import subprocess
import sys

import pytest
from PIL import Image

from ocrserve.engines import (
    ENGINE_NAMES,
    Engine,
    EngineError,
    EngineOptions,
    EngineResult,
    PageInput,
    create_engine,
    engine_class,
    engine_classes,
    register_engine,
    resolve_options,
    unregister_engine,
)
from ocrserve.engines.base import PIPELINE_OPTIONS, engine_options
from ocrserve.engines.hf import HFEngine
from ocrserve.engines.lite.engine import LiteEngine
from ocrserve.engines.openai import OpenAIEngine
from ocrserve.engines.vllm import VLLMEngine
from ocrserve.profiles import load_profile
from ocrserve.settings import Settings

PROFILE = load_profile("chandra-1")


class _FakeLLM:
    def chat(self, convs, sampling_params=None, use_tqdm=False):  # pragma: no cover - never called here
        raise AssertionError("not called")


def _page(i: int = 0) -> PageInput:
    return PageInput("d", i, image=Image.new("RGB", (8, 8), "white"))


# ---- the registry -------------------------------------------------------------------------------------


def test_every_engine_name_is_registered():
    assert tuple(ENGINE_NAMES) == ("lite", "openai", "hf", "vllm")
    assert engine_class("lite") is LiteEngine and engine_class("openai") is OpenAIEngine
    assert engine_class("vllm") is VLLMEngine and engine_class("hf") is HFEngine
    with pytest.raises(EngineError, match="unknown engine 'nope': use one of lite, openai, hf, vllm"):
        create_engine("nope", PROFILE)


def test_engine_modules_load_when_asked_and_never_import_heavy_libraries():
    # `import ocrserve.engines` imports no engine module; reading every contract imports no torch or vllm
    code = (
        "import sys, ocrserve.engines as e\n"
        "assert not any(m in sys.modules for m in ('ocrserve.engines.hf', 'ocrserve.engines.vllm',"
        " 'ocrserve.engines.openai', 'ocrserve.engines.lite.engine')), sorted(sys.modules)\n"
        "e.option_names()\n"
        "assert [c.name for c in e.engine_classes()] == ['lite', 'openai', 'hf', 'vllm']\n"
        "heavy = [m for m in ('torch', 'transformers', 'vllm') if m in sys.modules]\n"
        "assert not heavy, heavy\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]


def test_each_class_carries_its_traits():
    assert (LiteEngine.model_engine, LiteEngine.cpu_bound, LiteEngine.needs_gpu) == (False, True, False)
    assert (VLLMEngine.batched, VLLMEngine.needs_gpu, VLLMEngine.ray_batch_size) == (True, True, 64)
    assert (HFEngine.needs_gpu, HFEngine.ray_batch_size, HFEngine.batched) == (True, 8, False)
    assert OpenAIEngine.needs_gpu and OpenAIEngine.preflight_on_driver and OpenAIEngine.model_engine
    assert not any(c.preflight_on_driver for c in (LiteEngine, HFEngine, VLLMEngine))


def test_every_option_has_a_type_default_and_description():
    for cls in engine_classes():
        assert issubclass(cls.Options, EngineOptions), cls
        for name, field in cls.Options.model_fields.items():
            assert field.description, f"{cls.name}: option {name} has no description"
            assert field.annotation is not None
        for option, knob in cls.Options.settings_defaults.items():
            assert option in cls.Options.model_fields and knob in Settings.model_fields, (cls.name, option, knob)


def test_a_runtime_engine_is_registered_and_forgotten():
    class Toy(Engine):
        name = "toy-registry"

        def __init__(self, profile, options=None):
            self.profile, self.options = profile, options

        async def ocr(self, page, *, on_delta=None):  # pragma: no cover
            raise AssertionError

    assert register_engine(Toy) is Toy
    try:
        assert "toy-registry" in ENGINE_NAMES and engine_class("toy-registry") is Toy
        eng = create_engine("toy-registry", PROFILE, concurrency=3, server="h:1")  # pipeline options: dropped
        assert isinstance(eng, Toy) and type(eng.options) is EngineOptions
    finally:
        unregister_engine("toy-registry")
    assert "toy-registry" not in ENGINE_NAMES
    unregister_engine("lite")  # a built-in goes back to its lazy entry
    assert engine_class("lite") is LiteEngine


def test_register_engine_checks_the_contract():
    class NoName(Engine):
        async def ocr(self, page, *, on_delta=None):  # pragma: no cover
            raise AssertionError

    with pytest.raises(ValueError, match="no name"):
        register_engine(NoName)
    with pytest.raises(TypeError, match="not an Engine"):
        register_engine(dict)  # type: ignore[type-var]

    class BadOptions(NoName):
        name = "bad"
        Options = dict  # type: ignore[assignment]

    with pytest.raises(TypeError, match="EngineOptions"):
        register_engine(BadOptions)


def test_vllm_is_built_by_create_engine():
    eng = create_engine("vllm", PROFILE, llm=_FakeLLM(), sampling_factory=dict, max_tokens=9)
    assert isinstance(eng, VLLMEngine) and eng.batched and eng.max_tokens == 9


# ---- options: checked by the engine's model, defaults from Settings -----------------------------------------


def test_an_option_the_engine_does_not_take_is_an_error_naming_it_and_those_it_takes():
    with pytest.raises(
        EngineError,
        match=r"engine 'lite' does not take option\(s\) 'checkpoint' \(it takes: "
        r"mp_start, ocr, timeout, trust_invisible, warm, workers\)",
    ):
        create_engine("lite", PROFILE, checkpoint="some/model")
    with pytest.raises(EngineError, match=r"engine 'openai' does not take option\(s\) 'device'"):
        create_engine("openai", PROFILE, server="h:8000", device="cpu")
    with pytest.raises(EngineError, match=r"engine 'lite' does not take option\(s\) 'api_key', 'device'"):
        create_engine("lite", PROFILE, device="cpu", api_key="k")
    with pytest.raises(EngineError, match=r"engine 'openai' does not take option\(s\) 'settings'"):
        OpenAIEngine(PROFILE, server="h:8000", settings=Settings())  # engines read no Settings: the caller does


def test_a_bad_value_is_an_error_naming_the_option():
    with pytest.raises(EngineError, match=r"engine 'lite': option 'ocr': Input should be 'auto', 'always' or 'never'"):
        create_engine("lite", PROFILE, ocr="sometimes")
    with pytest.raises(EngineError, match=r"engine 'hf': option 'batch_size': .*greater than or equal to 1"):
        create_engine("hf", PROFILE, batch_size=0)  # checked before the engine (and torch) loads
    with pytest.raises(EngineError, match=r"engine 'openai': option 'concurrency': .*valid integer"):
        create_engine("openai", PROFILE, server="h:8000", concurrency="many")
    with pytest.raises(EngineError, match="as one OpenAIOptions or as keywords"):
        OpenAIEngine(PROFILE, OpenAIEngine.Options(server="h:1"), server="h:2")


def test_pipeline_options_and_unset_options_are_dropped_where_not_taken():
    # the pipeline passes concurrency (Converter) and server (Ray) to whichever engine it builds
    assert PIPELINE_OPTIONS == {"concurrency", "server"}
    opts = resolve_options(LiteEngine, {"concurrency": 4, "server": "h:1", "workers": 2, "ocr": None})
    assert opts.model_dump(exclude_defaults=True) == {"workers": 2}
    eng = create_engine("lite", PROFILE, concurrency=4, server="h:1", workers=3, timeout=None)
    try:
        assert isinstance(eng, LiteEngine) and eng.workers == 3
    finally:
        asyncio.run(eng.aclose())
    eng = create_engine("openai", PROFILE, server="h:8000", concurrency=5, api_key=None)
    assert isinstance(eng, OpenAIEngine) and eng.capacity() == 5


def test_create_engine_fills_unset_options_from_settings_and_a_choice_wins():
    s = Settings(
        lite_workers=3,
        request_timeout=9,
        mp_start="spawn",
        server="http://s:1",
        api_key="k",
        served_model="m",
        concurrency=6,
        max_connection_retries=1,
    )
    lite = resolve_options(LiteEngine, {}, s)
    assert (lite.workers, lite.timeout, lite.mp_start) == (3, 9, "spawn")
    assert resolve_options(LiteEngine, {"workers": 5, "timeout": 2}, s).model_dump(include={"workers", "timeout"}) == {
        "workers": 5,
        "timeout": 2,
    }
    eng = create_engine(None, PROFILE, s)  # no name: the configured server makes it openai
    assert isinstance(eng, OpenAIEngine)
    assert (eng.base_url, eng.api_key, eng.served_model, eng.capacity(), eng.timeout, eng.max_connection_retries) == (
        "http://s:1/v1",
        "k",
        "m",
        6,
        9.0,
        1,
    )
    # built directly, an engine takes its options' defaults and reads no Settings
    assert resolve_options(LiteEngine, {}).model_dump() == LiteEngine.Options().model_dump()


def test_each_engine_declares_its_options_by_its_model():
    assert engine_options(LiteEngine) == {"workers", "warm", "timeout", "ocr", "trust_invisible", "mp_start"}
    assert {"server", "api_key", "concurrency", "max_tokens", "ignore_eos", "timeout"} <= engine_options(OpenAIEngine)
    assert "device" not in engine_options(OpenAIEngine)
    assert {"checkpoint", "device", "dtype", "batch_size", "max_tokens", "max_retries"} <= engine_options(HFEngine)


def test_the_ray_engine_spec_builds_through_create_engine():
    from ocrserve.pipeline.ray_engine import EngineSpec

    spec = EngineSpec(
        name="vllm",
        model=PROFILE,
        settings=Settings(),
        options={"llm": _FakeLLM(), "sampling_factory": dict, "concurrency": 8},
    )
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
