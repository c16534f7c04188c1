"""The engine registry end to end: an engine defined and registered here, at runtime, converts documents by
name with its own typed options, is wrapped in the lite fallback like any model engine, and the Ray plan
asks its class, with no other file touched."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import Field

import ocrserve
from ocrserve.engines import (
    Engine,
    EngineError,
    EngineOptions,
    EngineResult,
    engine_class,
    option_names,
    register_engine,
    unregister_engine,
)
from ocrserve.pipeline.options import ConvertOptions, engine_fields
from ocrserve.profiles import load_profile
from tests.support import helpers


class ToyOptions(EngineOptions):
    greeting: str = Field("hello", description="what each block says")
    repeat: int = Field(1, ge=1, le=5, description="blocks a page")
    give_up_on: list[int] = Field(default_factory=list, description="pages (0-based) the engine gives up on")


class ToyEngine(Engine):
    """Writes `repeat` paragraphs of `greeting` on each page, in Chandra's layout-block form."""

    name = "toy"
    Options = ToyOptions

    def __init__(self, profile, options: ToyOptions) -> None:
        self.profile = load_profile(profile)
        self.options = options

    async def ocr(self, page, *, on_delta=None) -> EngineResult:
        o = self.options
        if page.index in o.give_up_on:
            return EngineResult(ok=False, engine=self.name, attempts=2, finish_reason="error", error="toy gave up")
        raw = "".join(
            f'<div data-bbox="[60, {40 + 60 * i}, 960, {90 + 60 * i}]" data-label="Text">'
            f"<p>{o.greeting} {page.index + 1}.{i + 1}</p></div>"
            for i in range(o.repeat)
        )
        return EngineResult(raw=raw, engine=self.name, finish_reason="stop")


@pytest.fixture
def toy():
    register_engine(ToyEngine)
    yield ToyEngine
    unregister_engine("toy")


def test_a_registered_engine_converts_by_name_with_its_own_option(tmp_path, toy):
    pdf = helpers.text_pdf(tmp_path / "memo.pdf", pages=2)
    (res,) = ocrserve.convert(
        pdf,
        output_dir=tmp_path / "out",
        engine="toy",
        model="chandra-1",
        engine_options={"greeting": "Ahoy", "repeat": 2},
    )
    doc = res.document
    assert doc.model == "chandra-1"  # a model engine by default: the Document names the profile
    assert [(p.status, p.engine) for p in doc.pages] == [("ok", "toy"), ("ok", "toy")]
    assert [b.text for b in doc.pages[1].blocks] == ["Ahoy 2.1", "Ahoy 2.2"]
    md = next((tmp_path / "out").rglob("*.md")).read_text()
    assert "Ahoy 1.1" in md and "Ahoy 2.2" in md


def test_its_pages_are_rescued_by_the_fallback_like_any_model_engine(tmp_path, toy):
    pdf = helpers.text_pdf(tmp_path / "memo.pdf", pages=2, title="Memo")
    (res,) = ocrserve.convert(pdf, engine="toy", model="chandra-1", engine_options={"give_up_on": [1]})
    doc = res.document
    ok, rescued = doc.pages
    assert (ok.status, rescued.status, rescued.engine, rescued.error) == ("ok", "fallback", "lite", "toy gave up")
    assert rescued.attempts == 3 and any("Memo page 2" in b.text for b in rescued.blocks)  # lite read it
    (res,) = ocrserve.convert(pdf, engine="toy", model="chandra-1", engine_options={"give_up_on": [1]}, fallback=False)
    doc = res.document
    assert [p.status for p in doc.pages] == ["ok", "failed"] and doc.pages[1].error == "toy gave up"


def test_a_not_model_engine_is_never_wrapped(tmp_path, toy, monkeypatch):
    monkeypatch.setattr(ToyEngine, "model_engine", False)
    pdf = helpers.text_pdf(tmp_path / "memo.pdf", pages=2)
    (res,) = ocrserve.convert(pdf, engine="toy", model="chandra-1", engine_options={"give_up_on": [0]})
    doc = res.document
    assert [p.status for p in doc.pages] == ["failed", "ok"] and doc.model == "toy"


def test_its_options_are_checked_by_its_model(tmp_path, toy):
    pdf = helpers.text_pdf(tmp_path / "memo.pdf", pages=1)
    with pytest.raises(EngineError, match=r"engine 'toy': option 'repeat': .*less than or equal to 5"):
        ocrserve.convert(pdf, engine="toy", engine_options={"repeat": 9})
    with pytest.raises(
        EngineError,
        match=r"engine 'toy' does not take option\(s\) 'colour' "
        r"\(it takes: give_up_on, greeting, repeat\)",
    ):
        ocrserve.convert(pdf, engine="toy", engine_options={"colour": "red"})
    with pytest.raises(EngineError, match=r"engine 'toy' does not take option\(s\) 'checkpoint'"):
        ocrserve.convert(pdf, engine="toy", checkpoint="some/model")  # a convert option another engine takes


def test_the_ray_plan_and_batch_size_ask_the_class(toy, monkeypatch):
    from ocrserve.pipeline.ray_cluster import actor_plan, engine_type

    assert engine_type("toy", None) is ToyEngine and engine_type("x", ToyEngine) is ToyEngine
    assert engine_type("x", lambda *a, **k: None) is Engine  # a factory function: the defaults
    cluster = {"GPU": 2.0, "CPU": 8.0}
    assert actor_plan(ToyEngine, None, None, None, cluster) == (1, 0.0, 1.0)  # an I/O engine: one actor
    monkeypatch.setattr(ToyEngine, "cpu_bound", True)
    assert actor_plan(ToyEngine, None, None, None, cluster) == (4, 0.0, 1.0)  # an actor per two CPUs
    monkeypatch.setattr(ToyEngine, "needs_gpu", True)
    assert actor_plan(ToyEngine, None, None, None, cluster) == (2, 1.0, 1.0)  # an actor per GPU
    assert actor_plan(ToyEngine, None, None, None, {"CPU": 8.0}) == (4, 0.0, 1.0)  # no GPUs in the cluster
    assert actor_plan(engine_class("lite"), None, None, None, cluster) == (4, 0.0, 1.0)
    assert actor_plan(engine_class("vllm"), None, None, None, cluster) == (2, 1.0, 1.0)
    assert (ToyEngine.ray_batch_size, engine_class("vllm").ray_batch_size) == (8, 64)


def test_the_engine_fields_of_convert_are_the_union_of_the_engines_options():
    assert set(engine_fields()) == {
        "server",
        "api_key",
        "served_model",
        "concurrency",
        "checkpoint",
        "device",
        "batch_size",
        "max_tokens",
        "max_retries",
        "ignore_eos",
        "static_cache",
    }
    assert set(engine_fields()) == set(ConvertOptions.model_fields) & option_names()


def test_unregistered_it_is_unknown(tmp_path):
    with pytest.raises(EngineError, match="unknown engine 'toy'"):
        ocrserve.convert(helpers.text_pdf(Path(tmp_path) / "a.pdf", pages=1), engine="toy")
