"""Command-line options built from the options a model declares (`ConvertOptions`, pipeline/options.py).

Each option is declared once, on its field: help, type, default, flags, whether Settings backs it.
From that declaration this module makes the typer parameters of a command and maps what was given on
the command line back to option keywords. The rules, from the field's type:

- a bool is a flag pair: the declared flag (`--force`, or a `--no-...` one: `--no-fallback`) and its
  opposite (`--no-force`, `--fallback`), which sets the other value (over a config file's, an env's);
- a tuple or list is repeatable (`--format md --format pdf`, or a comma list the model's validator splits);
- a Literal is a choice; str, int, float are values; any other type (RayOptions) takes TEXT, and the
  model's validator turns the text into its value (`--ray auto`);
- nothing given means not chosen: the option keeps the model's default (None: Settings decides).
"""

from __future__ import annotations

import inspect
import types
import typing
from collections.abc import Callable
from typing import Any, Literal, Union

import typer

from ocrserve.pipeline.options import OptionSpec
from ocrserve.settings import Settings

_SCALARS = (str, int, float)


def members(annotation: Any) -> list[Any]:
    """The types of a union (`str | None` -> [str]), None left out."""
    if typing.get_origin(annotation) in (Union, types.UnionType):
        return [a for a in typing.get_args(annotation) if a is not type(None)]
    return [annotation]


def cli_type(spec: OptionSpec) -> Any:
    """The annotation typer gets for an option: bool (a flag), list[str] | None, <scalar> | None."""
    kinds = members(spec.annotation)
    if bool in kinds:
        return bool
    for m in kinds:
        if typing.get_origin(m) in (tuple, list):
            return list[str] | None
        if typing.get_origin(m) is Literal or m in _SCALARS:
            return m | None
    return str | None


def env_name(name: str) -> str:
    return f"{Settings.model_config.get('env_prefix', '')}{name}".upper()


def cli_help(spec: OptionSpec) -> str:
    """The help a flag shows: the declared help (or, for a `--no-` flag, its own), the variable that
    gives its default, and for a flag pair the opposite flag."""
    text = spec.cli_help or spec.help
    text = f"{text}; env {env_name(spec.name)}" if spec.env else text
    if spec.flags and cli_type(spec) is bool:
        on, off = flag_pair(spec.flags[0])
        if spec.flags[0] == off:  # the help tells what the declared `--no-` flag does, shown second
            return f"{off}: {text} ({on}: the opposite, over a config file or env)"
        text = f"{text} ({off}: the opposite, over a config file or env)"
    return text


def cli_flags(spec: OptionSpec) -> tuple[str, ...]:
    """The flags the command has for an option: a bool's pair (the one setting True first), or its own."""
    if spec.flags and cli_type(spec) is bool:
        return (*flag_pair(spec.flags[0]), *spec.flags[1:])
    return spec.flags


def flag_pair(flag: str) -> tuple[str, str]:
    """(the flag that sets True, the one that sets False) for a bool option's declared flag."""
    if flag.startswith("--no-"):
        return "--" + flag[len("--no-") :], flag
    return flag, "--no-" + flag[2:]


def parameters(specs: dict[str, OptionSpec]) -> list[inspect.Parameter]:
    """Keyword-only parameters, one per option with flags, in declaration order."""
    out = []
    for spec in specs.values():
        if not spec.flags:
            continue
        kind = cli_type(spec)
        if kind is bool:  # None: neither flag given
            on, off = flag_pair(spec.flags[0])
            info = typer.Option(None, f"{on}/{off}", *spec.flags[1:], help=cli_help(spec), metavar=spec.metavar)
            out.append(
                inspect.Parameter(spec.name, inspect.Parameter.KEYWORD_ONLY, default=info, annotation=bool | None)
            )
            continue
        info = typer.Option(spec.cli_default, *spec.flags, help=cli_help(spec), metavar=spec.metavar)
        out.append(inspect.Parameter(spec.name, inspect.Parameter.KEYWORD_ONLY, default=info, annotation=kind))
    return out


def chosen(specs: dict[str, OptionSpec], values: dict[str, Any]) -> dict[str, Any]:
    """The option keywords for what the command line gave (a flag set, a value not None, a list not empty)."""
    out: dict[str, Any] = {}
    for name, spec in specs.items():
        if not spec.flags or name not in values:
            continue
        v = values[name]
        if cli_type(spec) is bool:
            if v is not None:
                out[name] = bool(v)  # the flag pair's own value: --fallback True, --no-fallback False
        elif v is not None and v != []:
            out[name] = v
    return out


def with_signature(func: Callable[..., Any], params: list[inspect.Parameter]) -> Callable[..., Any]:
    """`func(**values)` as typer sees a function with these parameters (typer reads inspect.signature)."""
    func.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]  # read by inspect.signature
    func.__annotations__ = {p.name: p.annotation for p in params}
    return func
