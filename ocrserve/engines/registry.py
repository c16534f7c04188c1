"""The engine registry: engines by name, each class carrying its contract (engines/base.py `Engine`).

`@register_engine` on an engine class registers it under its `name`. The built-in engines are listed
here by "module:Class" (BUILTIN) and imported only when one is asked for (its class, its options, or
building it): `import ocrserve.engines` imports no engine module, and the module's `@register_engine`
then puts the class in place of the entry. An engine module imports nothing heavy at module level
(hf and vllm import torch, transformers and vllm when an engine is built), so reading a class's
contract costs a light import (tests/engines/test_registry.py checks it). A third-party engine only
needs its class decorated and its module imported.

`create_engine(name, profile, settings, **options)` builds one: its options are checked by the class's
Options model (an unknown one is an EngineError naming it and listing those it takes), None values are
options not set, the pipeline's options (PIPELINE_OPTIONS: concurrency, server) are dropped for an
engine that does not declare them, and an option not given takes its default from Settings where the
model names a Settings knob. The engine gets plain values and reads no Settings itself.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from typing import Any, TypeVar, overload

from ocrserve.engines.base import PIPELINE_OPTIONS, Engine, EngineError, EngineOptions

# the engines that ship with ocrserve, imported when first asked for
BUILTIN: dict[str, str] = {
    "lite": "ocrserve.engines.lite.engine:LiteEngine",
    "openai": "ocrserve.engines.openai:OpenAIEngine",
    "hf": "ocrserve.engines.hf:HFEngine",
    "vllm": "ocrserve.engines.vllm:VLLMEngine",
}
# the engine rule (engine_for): openai when a server is given, else lite; lite rescues the pages a model
# engine gives up on (engines/fallback.py)
SERVER_ENGINE = "openai"
DEFAULT_ENGINE = "lite"
FALLBACK_ENGINE = "lite"

_registry: dict[str, type[Engine] | str] = dict(BUILTIN)

E = TypeVar("E", bound=type[Engine])


def register_engine(cls: E) -> E:
    """Class decorator: `cls` is the engine called `cls.name` (replacing one registered before)."""
    if not (isinstance(cls, type) and issubclass(cls, Engine)):
        raise TypeError(f"{cls!r} is not an Engine class")
    if not cls.name or not isinstance(cls.name, str):
        raise ValueError(f"{cls.__name__} has no name: set the class attribute `name`")
    if not (isinstance(cls.Options, type) and issubclass(cls.Options, EngineOptions)):
        raise TypeError(f"{cls.__name__}.Options is not an EngineOptions model")
    _registry[cls.name] = cls
    return cls


def unregister_engine(name: str) -> None:
    """Forget an engine registered at runtime (a built-in goes back to its lazy entry)."""
    if name in BUILTIN:
        _registry[name] = BUILTIN[name]
    else:
        _registry.pop(name, None)


def engine_names() -> tuple[str, ...]:
    """The registered engines' names, built-ins first (nothing is imported)."""
    return tuple(_registry)


class _Names(Sequence):
    """ENGINE_NAMES: the registered names as they are now (an engine registered later is in it)."""

    @overload
    def __getitem__(self, i: int) -> str: ...
    @overload
    def __getitem__(self, i: slice) -> tuple[str, ...]: ...

    def __getitem__(self, i: Any) -> Any:
        return engine_names()[i]

    def __len__(self) -> int:
        return len(_registry)

    def __contains__(self, name: object) -> bool:
        return name in _registry

    def __repr__(self) -> str:
        return repr(engine_names())


ENGINE_NAMES: Sequence[str] = _Names()


def _unknown(name: object) -> EngineError:
    return EngineError(f"unknown engine {name!r}: use one of {', '.join(_registry)}")


def engine_for(name: str | None, server: str | None) -> str:
    """The engine a run uses: the one named, else openai when a server is given, else lite."""
    if name is None:
        return SERVER_ENGINE if server else DEFAULT_ENGINE
    if name not in _registry:
        raise _unknown(name)
    return name


def engine_class(name: str) -> type[Engine]:
    """The class of the engine `name` (a built-in's module is imported when first asked for)."""
    entry = _registry.get(name)
    if entry is None:
        raise _unknown(name)
    if isinstance(entry, str):
        module, _, attr = entry.partition(":")
        cls = getattr(importlib.import_module(module), attr)
        if getattr(cls, "name", None) != name:
            raise EngineError(f"{entry} is called {getattr(cls, 'name', None)!r}, registered as {name!r}")
        register_engine(cls)  # its decorator did already, unless it has none
        entry = cls
    return entry


def engine_classes() -> list[type[Engine]]:
    """Every registered engine class (the built-ins' modules imported)."""
    return [engine_class(n) for n in engine_names()]


def option_names() -> frozenset[str]:
    """Every option some registered engine takes (the union of their Options models)."""
    return frozenset(k for cls in engine_classes() for k in cls.Options.model_fields)


def resolve_options(cls: type[Engine], options: dict[str, Any], settings: Any = None) -> EngineOptions:
    """The options `cls` is built with (see the module's docstring): None values dropped, pipeline options
    it does not declare dropped, defaults from `settings` filled in, all checked by `cls.Options`."""
    model = cls.Options
    given = {
        k: v for k, v in options.items() if v is not None and (k in model.model_fields or k not in PIPELINE_OPTIONS)
    }
    if settings is not None:
        for opt, knob in model.settings_defaults.items():
            value = getattr(settings, knob, None)
            if opt not in given and value is not None:
                given[opt] = value
    return model.check(cls.name, given)


def create_engine(name: str | None, profile: Any, settings: Any = None, **options: Any) -> Engine:
    """Build an engine by name. With no name: openai when a server is given or configured, else lite."""
    from ocrserve.settings import get_settings

    settings = settings or get_settings()
    name = engine_for(name, options.get("server") or settings.server)
    cls = engine_class(name)
    return cls.create(profile, resolve_options(cls, options, settings))


def create_fallback(profile: Any, settings: Any = None) -> Engine:
    """The engine that rescues the pages a model engine gives up on (lite)."""
    return create_engine(FALLBACK_ENGINE, profile, settings)


__all__ = [
    "BUILTIN",
    "ENGINE_NAMES",
    "FALLBACK_ENGINE",
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
]
