"""`ocrserve config`: the effective settings (Settings knobs, convert, serve and api options) and where each
value comes from: the environment, the config file (--config / OCRSERVE_CONFIG) or the default."""

from __future__ import annotations

import json
from typing import Any

import typer

from ocrserve.cli.configopt import HELP, describe
from ocrserve.configfile import ConfigError, config_path, env_set, section, top_level


def _show(v: Any) -> str:
    if v is None:
        return "(unset)"
    return json.dumps(list(v) if isinstance(v, tuple) else v, default=str)


def _line(name: str, value: Any, source: str) -> str:
    return f"{name} = {_show(value)}  # {source}"


def command_defaults(name: str) -> dict[str, Any]:
    """The options of command `name` and their defaults, as its click command has them."""
    import typer.main

    from ocrserve.cli import app

    cmd = typer.main.get_command(app).commands[name]  # type: ignore[attr-defined]  # a group's commands
    return {p.name: p.default for p in cmd.params if p.name and p.name != "config" and p.name != "dry_run"}


def register(app: typer.Typer) -> None:
    @app.command("config")
    def config(config: str | None = typer.Option(None, "--config", metavar="FILE", help=HELP)) -> None:
        """Print the effective settings: each value and where it comes from (env, file or default)."""
        import os

        from pydantic import ValidationError

        from ocrserve.configfile import ENV
        from ocrserve.pipeline.options import ConvertOptions
        from ocrserve.settings import Settings

        path = config_path(config)
        try:
            if path is not None:
                path = path.resolve()
                os.environ[ENV] = str(path)
                top = top_level(path, Settings.model_fields)
            else:
                top = {}
            try:
                settings = Settings()
            except ValidationError as e:
                raise ConfigError(f"{path or 'the environment'}: {describe(e)}") from None
            specs = ConvertOptions.declared()
            tables = {
                "convert": section(path, "convert", specs) if path else {},
                "serve": section(path, "serve", command_defaults("serve")) if path else {},
                "api": section(path, "api", {*command_defaults("api"), *Settings.model_fields}) if path else {},
            }
            if tables["convert"]:
                ConvertOptions.build(**tables["convert"])
        except (ConfigError, ValueError) as e:
            typer.echo(f"error: {e}", err=True)
            raise typer.Exit(2) from None

        def knob(name: str) -> tuple[Any, str]:
            if env_set(name):
                return getattr(settings, name), f"env OCRSERVE_{name.upper()}"
            return getattr(settings, name), ("file" if name in top else "default")

        def from_table(table: str, name: str, default: Any, env_backed: bool) -> str:
            if env_backed and env_set(name):
                return _line(name, getattr(settings, name), f"env OCRSERVE_{name.upper()}")
            if name in tables[table]:
                return _line(name, tables[table][name], f"file [{table}]")
            if env_backed and default is None:
                return _line(name, *knob(name))
            return _line(name, default, "default")

        out = [f"# config file: {path or 'none (--config FILE or OCRSERVE_CONFIG)'}", "", "# Settings (top level)"]
        out += [_line(name, *knob(name)) for name in Settings.model_fields]
        out += ["", "[convert]"]
        for name, spec in specs.items():
            default = ConvertOptions.model_fields[name].get_default(call_default_factory=True)
            out.append(from_table("convert", name, default, spec.env))
        out += ["", "[serve]"]
        out += [from_table("serve", n, d, n == "vllm_bin") for n, d in command_defaults("serve").items()]
        out += ["", "[api]"]
        api = command_defaults("api")
        out += [from_table("api", n, d, n in Settings.model_fields) for n, d in api.items()]
        out += [from_table("api", n, None, True) for n in tables["api"] if n not in api]  # Settings knobs
        typer.echo("\n".join(out))
