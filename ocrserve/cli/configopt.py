"""`--config FILE` of convert, serve and api: the command's table of the config file (ocrserve/configfile.py).

An eager option: before the other options are read it loads the file (--config, else OCRSERVE_CONFIG),
checks its keys (top level: Settings knobs; `[<command>]`: the command's options), and exports
OCRSERVE_CONFIG so every Settings built from now on, in this process and its workers, reads the file's
top-level keys below the environment. The table's values become the defaults of the command's options
(click's default_map: a flag given still wins); a key that an OCRSERVE_* variable also sets is left out
(the environment wins). What the command reads elsewhere (convert's options, api's Settings knobs) is in
ctx.meta["config_values"]. Any problem: one line `error: FILE: ...` and exit 2.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from typing import Any

import typer
from pydantic import ValidationError

from ocrserve.configfile import ENV, ConfigError, config_path, env_set, section
from ocrserve.settings import Settings

HELP = "TOML config file: top-level Settings knobs, [convert], [serve], [api] tables; flag > env > file (env OCRSERVE_CONFIG)"


def config_option(
    name: str,
    *,
    known: Callable[[], Iterable[str]] | None = None,
    env_backed: Callable[[], Iterable[str]] = lambda: Settings.model_fields,
    default_map: bool = True,
    check: Callable[[dict[str, Any]], None] | None = None,
) -> Any:
    """The `--config` option of command `name`. `known`: the table's keys (default: the command's own
    options); `env_backed`: keys an OCRSERVE_* variable overrides; `default_map`: the values become the
    options' defaults; `check(values)` raises ValueError for a bad value."""

    def apply(ctx: typer.Context, param: typer.CallbackParam, value: str | None) -> str | None:
        try:
            path = config_path(value)
            if path is None:
                return value
            path = path.resolve()
            params = {p.name for p in ctx.command.params if p.name and p.name != param.name}
            values = section(path, name, known() if known else params)
            os.environ[ENV] = str(path)  # Settings built from now on (workers too) read its top-level keys
            try:
                Settings()
            except ValidationError as e:
                raise ConfigError(f"{path} (or the environment): {describe(e)}") from None
            backed = set(env_backed())
            values = {k: v for k, v in values.items() if not (k in backed and env_set(k))}
            if check is not None:
                try:
                    check(values)
                except ValueError as e:
                    raise ConfigError(f"{path}: [{name}] {e}") from None
        except ConfigError as e:
            typer.echo(f"error: {e}", err=True)
            raise typer.Exit(2) from None
        if default_map:
            ctx.default_map = {**(ctx.default_map or {}), **{k: v for k, v in values.items() if k in params}}
        ctx.meta["config_file"] = path
        ctx.meta["config_values"] = values
        return str(path)

    return typer.Option(None, "--config", metavar="FILE", help=HELP, is_eager=True, callback=apply)


def file_values(ctx: typer.Context) -> dict[str, Any]:
    """What the command's table gave (after the environment took its keys); {} without a file."""
    return dict(ctx.meta.get("config_values", {}))


def from_command_line(ctx: typer.Context, names: Iterable[str]) -> set[str]:
    """Those of `names` that the command line gave, not a default (nor the file's default_map)."""
    out = set()
    for n in names:
        source = ctx.get_parameter_source(n)
        if source is not None and source.name not in ("DEFAULT", "DEFAULT_MAP"):
            out.add(n)
    return out


def describe(e: ValidationError) -> str:
    return "; ".join(f"{'.'.join(map(str, err.get('loc', ()))) or 'value'}: {err.get('msg', '')}" for err in e.errors())
