"""Engines: openai (vLLM or any OpenAI-compatible server), hf (transformers in-process), vllm (vLLM
in-process, for Ray actors), lite (CPU).

Each engine class carries its contract (name, Options model, traits: engines/base.py) and registers
itself (engines/registry.py); `create_engine(name, profile, settings, **options)` builds one with its
options checked by its model and their defaults resolved from Settings. `FallbackEngine`
(engines/fallback.py) wraps a model engine so the pages it gives up on are rescued by lite.
"""

from __future__ import annotations

from ocrserve.engines import registry
from ocrserve.engines.base import PIPELINE_OPTIONS, Engine, EngineError, EngineOptions, EngineResult, PageInput
from ocrserve.engines.fallback import FallbackEngine
from ocrserve.engines.registry import *  # noqa: F403  (its __all__ is the package's registry API)

# the registry's names, as registry.py lists them, and the contract's
__all__ = ["Engine", "EngineError", "EngineOptions", "EngineResult", "FallbackEngine", "PageInput", "PIPELINE_OPTIONS"]
__all__ += registry.__all__
