"""Engines: openai (vLLM or any OpenAI-compatible server), hf (transformers in-process), vllm (vLLM
in-process, for Ray actors), lite (CPU).

Each engine class carries its contract (name, Options model, traits: engines/base.py) and registers
itself (engines/registry.py); `create_engine(name, profile, settings, **options)` builds one with its
options checked by its model and their defaults resolved from Settings. `FallbackEngine`
(engines/fallback.py) wraps a model engine so the pages it gives up on are rescued by lite.
"""

from __future__ import annotations

from ocrserve.engines.base import PIPELINE_OPTIONS, Engine, EngineError, EngineOptions, EngineResult, PageInput
from ocrserve.engines.fallback import FallbackEngine
from ocrserve.engines.registry import (
    ENGINE_NAMES,
    FALLBACK_ENGINE,
    create_engine,
    create_fallback,
    engine_class,
    engine_classes,
    engine_for,
    engine_names,
    option_names,
    register_engine,
    resolve_options,
    unregister_engine,
)

__all__ = [
    "Engine",
    "EngineError",
    "EngineOptions",
    "EngineResult",
    "FallbackEngine",
    "PageInput",
    "create_engine",
    "create_fallback",
    "engine_class",
    "engine_classes",
    "engine_for",
    "engine_names",
    "option_names",
    "register_engine",
    "resolve_options",
    "unregister_engine",
    "ENGINE_NAMES",
    "FALLBACK_ENGINE",
    "PIPELINE_OPTIONS",
]
