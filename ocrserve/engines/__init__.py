"""Engines: openai (vLLM or any OpenAI-compatible server), hf (transformers in-process), lite (CPU)."""

from __future__ import annotations

from ocrserve.engines.base import Engine, EngineError, EngineResult, PageInput

ENGINE_NAMES = ("lite", "openai", "hf", "vllm")


def engine_for(name: str | None, server: str | None) -> str:
    """The engine a run uses: the one named, else openai when a server is given, else lite."""
    if name is None:
        return "openai" if server else "lite"
    if name not in ENGINE_NAMES:
        raise EngineError(f"unknown engine {name!r}: use one of {', '.join(ENGINE_NAMES)}")
    return name


def create_engine(name: str | None, profile, settings=None, **options) -> Engine:
    """Build an engine by name. With no name: openai when a server is configured, else lite."""
    from ocrserve.settings import get_settings

    settings = settings or get_settings()
    server = options.get("server") or settings.server or ""
    name = engine_for(name, server)
    if name == "lite":
        from ocrserve.engines.lite.engine import LiteEngine

        return LiteEngine(profile, settings=settings, **options)
    if name == "openai":
        from ocrserve.engines.openai import MultiServerEngine, OpenAIEngine

        if "," in server:  # data-parallel replicas: one engine each, pages to the least busy
            urls = [u.strip() for u in server.split(",") if u.strip()]
            return MultiServerEngine([OpenAIEngine(profile, settings=settings, **{**options, "server": u}) for u in urls])
        return OpenAIEngine(profile, settings=settings, **options)
    if name == "hf":
        from ocrserve.engines.hf import HFEngine

        return HFEngine(profile, settings=settings, **options)
    if name == "vllm":
        from ocrserve.engines.vllm import VLLMEngine

        return VLLMEngine(profile, settings=settings, **options)
    raise EngineError(f"unknown engine {name!r}: use one of {', '.join(ENGINE_NAMES)}")


__all__ = ["Engine", "EngineError", "EngineResult", "PageInput", "create_engine", "engine_for", "ENGINE_NAMES"]
