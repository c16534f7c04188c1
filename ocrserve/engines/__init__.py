"""Engines: openai (vLLM or any OpenAI-compatible server), hf (transformers in-process), vllm (vLLM
in-process, for Ray actors), lite (CPU).

`create_engine(name, profile, settings, **options)` builds one. Options are the engine's __init__
keywords: None values are dropped (an option not set), the options the pipeline passes to every
engine (`PIPELINE_OPTIONS`: concurrency, server) are dropped for an engine that does not take them,
and any other option the engine does not take is an EngineError naming it.
"""

from __future__ import annotations

from ocrserve.engines.base import PIPELINE_OPTIONS, Engine, EngineError, EngineResult, PageInput, check_options

ENGINE_NAMES = ("lite", "openai", "hf", "vllm")


def engine_for(name: str | None, server: str | None) -> str:
    """The engine a run uses: the one named, else openai when a server is given, else lite."""
    if name is None:
        return "openai" if server else "lite"
    if name not in ENGINE_NAMES:
        raise EngineError(f"unknown engine {name!r}: use one of {', '.join(ENGINE_NAMES)}")
    return name


def engine_class(name: str) -> type[Engine]:
    """The class of the engine `name` (imported only when asked: hf and vllm pull in heavy libraries)."""
    if name == "lite":
        from ocrserve.engines.lite.engine import LiteEngine

        return LiteEngine
    if name == "openai":
        from ocrserve.engines.openai import OpenAIEngine

        return OpenAIEngine
    if name == "hf":
        from ocrserve.engines.hf import HFEngine

        return HFEngine
    if name == "vllm":
        from ocrserve.engines.vllm import VLLMEngine

        return VLLMEngine
    raise EngineError(f"unknown engine {name!r}: use one of {', '.join(ENGINE_NAMES)}")


def create_engine(name: str | None, profile, settings=None, **options) -> Engine:
    """Build an engine by name. With no name: openai when a server is configured, else lite."""
    from ocrserve.settings import get_settings

    settings = settings or get_settings()
    server = options.get("server") or settings.server or ""
    name = engine_for(name, server)
    cls = engine_class(name)
    options = check_options(name, cls, options)
    if name == "openai" and "," in server:  # data-parallel replicas: one engine each, pages to the least busy
        from ocrserve.engines.openai_multi import MultiServerEngine

        urls = [u.strip() for u in server.split(",") if u.strip()]
        return MultiServerEngine([cls(profile, settings=settings, **{**options, "server": u}) for u in urls])
    return cls(profile, settings=settings, **options)


__all__ = ["Engine", "EngineError", "EngineResult", "PageInput", "create_engine", "engine_class", "engine_for", "ENGINE_NAMES",
           "PIPELINE_OPTIONS"]
