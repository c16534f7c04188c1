"""Each convert option is declared once, on its ConvertOptions field (#27.2): the CLI is built from the
declaration, Settings and the README are checked against it, and an option added to the declaration
shows up in all of them."""

from __future__ import annotations

import re
from typing import Any, Literal

import pytest
import typer
import typer.main
from pydantic import BaseModel
from typer.testing import CliRunner

from ocrserve.cli import convert as convert_cli
from ocrserve.cli import declared
from ocrserve.cli.helpfmt import plain_help
from ocrserve.engines import ENGINE_NAMES
from ocrserve.pipeline.options import ConvertOptions, RayOptions, option
from ocrserve.settings import Settings
from tests.cli.support import ROOT

CLI_ONLY = {"inputs", "json_log", "quiet", "config"}  # the command line's own (convert.py): inputs, progress, --config


def settings_mismatches(options: type[ConvertOptions], settings: type[BaseModel]) -> list[str]:
    """What keeps Settings from backing the options declared env=True: a missing knob, another type or
    other bounds or a default the option refuses; an option whose default is not None (resolve() could not tell it was not chosen); a
    knob named like an option that is not declared env=True (it would be ignored)."""
    out = []
    for name, spec in options.declared().items():
        field, knob = options.model_fields[name], settings.model_fields.get(name)
        if not spec.env:
            if knob is not None:
                out.append(f"{name}: Settings has it but the option is not declared env=True")
            continue
        if field.default is not None:
            out.append(f"{name}: default {field.default!r}, not None (Settings gives it)")
        if knob is None:
            out.append(f"{name}: declared env=True, Settings has no {name!r} ({declared.env_name(name)})")
            continue
        if not set(declared.members(knob.annotation)) <= set(declared.members(field.annotation)):
            out.append(f"{name}: Settings type {knob.annotation}, option type {field.annotation}")
        if sorted(map(repr, knob.metadata)) != sorted(map(repr, field.metadata)):
            out.append(f"{name}: Settings bounds {knob.metadata}, option bounds {field.metadata}")
        try:  # the value resolve() takes when nothing is set is one the option accepts
            options.build(**({} if knob.default is None else {name: knob.default}))
        except ValueError as e:
            out.append(f"{name}: the Settings default {knob.default!r} is no value of the option ({e})")
    return out


def command(model: type[ConvertOptions] = ConvertOptions) -> tuple[typer.Typer, Any]:
    """An app with `convert` built from `model`'s declaration, and its click command (help as ocrserve's)."""
    app = typer.Typer()
    app.callback()(lambda: None)  # a group: `convert` is its subcommand, as in ocrserve
    convert_cli.register(app, model)
    return app, plain_help(typer.main.get_command(app)).commands["convert"]


def help_text(cmd: Any, capsys, monkeypatch) -> str:
    monkeypatch.setenv("COLUMNS", "200")
    with pytest.raises(SystemExit) as e:
        cmd.main(["--help"], prog_name="ocrserve convert")
    assert e.value.code == 0
    return capsys.readouterr().out


def flags_of(cmd: Any) -> dict[str, tuple[str, ...]]:
    return {p.name: tuple(p.opts) + tuple(p.secondary_opts) for p in cmd.params if p.param_type_name == "option"}


# ------------------------------------------------------------------------------------------ the declaration


def test_every_option_is_declared_with_its_help_and_settings_back_the_env_ones():
    specs = ConvertOptions.declared()
    assert all(spec.help for spec in specs.values()), [n for n, s in specs.items() if not s.help]
    assert settings_mismatches(ConvertOptions, Settings) == []
    assert {n for n, s in specs.items() if s.env} == {
        "engine",
        "model",
        "server",
        "api_key",
        "served_model",
        "concurrency",
        "render_workers",
        "prefetch_pages",
        "fallback",
        "keep_headers_footers",
    }


def test_the_check_sees_a_settings_knob_that_drifted():
    class Drifted(Settings):
        concurrency: int = 0  # the old knob: 0 meant "derive", the option says at least 1
        force: bool = False  # a knob no option reads

    problems = "\n".join(settings_mismatches(ConvertOptions, Drifted))
    assert "concurrency: Settings bounds" in problems and "concurrency: the Settings default 0" in problems
    assert "force: Settings has it" in problems


def test_each_cli_flag_is_a_declared_option_and_each_declared_flag_is_on_the_cli():
    _, cmd = command()
    flags = flags_of(cmd)
    specs = ConvertOptions.declared()
    assert set(flags) - {"help"} == {n for n, s in specs.items() if s.flags} | CLI_ONLY - {"inputs"}
    for name, spec in specs.items():
        if spec.flags:
            assert flags[name] == declared.cli_flags(spec), name
            param = next(p for p in cmd.params if p.name == name)
            assert param.help == declared.cli_help(spec), name  # the declared help, nothing else
    # the Python-API-only options are declared so, not forgotten
    assert {n for n, s in specs.items() if not s.flags} == {"keep_raw", "prefetch_pages", "engine_options"}


def test_the_readme_table_lists_the_flags_of_the_command():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    table = text.split("### `ocrserve convert INPUT... -o OUT`", 1)[1].split("\n\n", 2)[1]
    rows = [ln.split(" | ")[0] for ln in table.splitlines() if ln.startswith("| `")]
    readme = {
        f
        for row in rows
        for cell in re.findall(r"`([^`]*)`", row)
        for f in re.findall(r"(?<![\w-])(--?[a-z][\w-]*)", cell)
    }
    _, cmd = command()
    flags = {f for fs in flags_of(cmd).values() for f in fs} - {"--help"}
    assert readme == flags, (sorted(readme - flags), sorted(flags - readme))
    engine_row = next(ln for ln in table.splitlines() if ln.startswith("| `-e, --engine`"))
    assert all(f"`{name}`" in engine_row for name in ENGINE_NAMES), engine_row


# ------------------------------------------------------------------------------------------ the special cases


class _Summary:
    """A run with nothing to do (what the command prints at the end)."""

    documents = pages = left = finished = pages_fallback = pages_resumed = 0
    elapsed_s = 0.0
    interrupted = False
    results: list = []
    failed: list = []
    degraded: list = []
    unsupported: list = []
    nothing_converted = False  # a stub: not the exit code of an empty run (4)

    def counts(self) -> dict:
        return {}

    def unnamed(self, status: str) -> int:
        return 0


def capture(monkeypatch) -> dict[str, Any]:
    """Stub the run of `convert`: what it was handed lands in the returned dict."""
    seen: dict[str, Any] = {}

    def fake_run(inputs, options, display):
        seen.update(inputs=inputs, options=options)
        return _Summary()

    monkeypatch.setattr(convert_cli, "_run", fake_run)
    return seen


@pytest.fixture
def ran(monkeypatch):
    """The options the real `ocrserve convert` hands to the scheduler (the run itself is stubbed)."""
    seen = capture(monkeypatch)
    from ocrserve.cli import app

    def run(*args: str) -> dict[str, Any]:
        res = CliRunner().invoke(app, ["convert", *args])
        assert res.exit_code == 0, res.output
        seen["output"] = res.output
        return dict(seen)

    return run


def test_nothing_given_is_nothing_chosen(ran):
    got = ran("-", "-q")
    assert got["inputs"] == ["-"]  # `-`: the paths come from stdin (ingest/sources.py reads them)
    assert got["options"] == ConvertOptions(output="ocrserve-out")


def test_the_flags_that_name_their_option_otherwise(ran):
    o = ran(
        "a.pdf",
        "--no-fallback",
        "--no-images",
        "--keep-headers-footers",
        "-q",
        "--engine",
        "hf",
        "--compile",
        "--format",
        "md",
        "--format",
        "pdf,chunks",
        "-o",
        "out",
        "-c",
        "4",
        "--pages",
        "1-2",
    )["options"]
    assert (o.fallback, o.figures, o.keep_headers_footers, o.static_cache) == (False, False, True, True)
    assert (o.formats, o.output, o.concurrency, o.pages, o.engine) == (
        ("md", "json", "pdf", "chunks"),
        "out",
        4,
        "1-2",
        "hf",
    )
    got = ran("a.pdf", "--compile", "-q")  # not the hf engine: said and dropped
    assert got["options"].static_cache is False and "--compile is for the hf engine" in got["output"]


def test_ray_address_is_the_ray_options(ran):
    o = ran("a.pdf", "--ray", "local", "--json-log")["options"]
    assert o.ray == RayOptions(address="local", progress=False)
    assert ran("a.pdf", "--ray", "auto")["options"].ray == RayOptions(address="auto")
    assert ConvertOptions.build(ray="auto").ray == RayOptions(address="auto")  # the Python API takes it too


# ------------------------------------------------------------------------------------------ a new option


class WithExtra(ConvertOptions):
    """ConvertOptions as a maintainer extends it: two options, declared once each."""

    layout: Literal["fast", "best"] | None = option(None, "layout analysis effort", cli=("--layout", "-L"), env=True)
    tables: bool = option(True, "read tables", cli=("--no-tables",), cli_help="leave tables as text")


class SettingsWithExtra(Settings):
    layout: Literal["fast", "best"] | None = None


def test_a_new_option_reaches_the_cli_the_python_api_and_settings(monkeypatch, capsys):
    app, cmd = command(WithExtra)
    assert flags_of(cmd)["layout"] == ("--layout", "-L") and flags_of(cmd)["tables"] == ("--tables", "--no-tables")
    text = help_text(cmd, capsys, monkeypatch)
    assert re.search(r"--layout\s+-L\s+\[fast\|best\]\s+layout analysis effort; env OCRSERVE_LAYOUT", text), text
    assert re.search(r"--no-tables\s+--no-tables: leave tables as text", text), text

    # the command line hands it to the scheduler, typed and checked
    seen = capture(monkeypatch)
    monkeypatch.setattr("ocrserve.pipeline.options.get_settings", lambda: SettingsWithExtra())
    res = CliRunner().invoke(app, ["convert", "a.pdf", "-L", "best", "--no-tables", "-q"])
    assert res.exit_code == 0, res.output
    assert isinstance(seen["options"], WithExtra) and (seen["options"].layout, seen["options"].tables) == (
        "best",
        False,
    )
    res = CliRunner().invoke(app, ["convert", "a.pdf", "-L", "slow"])
    assert res.exit_code == 2 and "slow" in res.output

    # the Python API: a keyword, checked
    assert WithExtra.build(layout="fast").layout == "fast"
    with pytest.raises(ValueError, match="layout"):
        WithExtra.build(layout="slow")

    # Settings: the check names the missing knob; with it, OCRSERVE_LAYOUT is the default
    assert settings_mismatches(WithExtra, Settings) == [
        "layout: declared env=True, Settings has no 'layout' (OCRSERVE_LAYOUT)"
    ]
    assert settings_mismatches(WithExtra, SettingsWithExtra) == []
    monkeypatch.setenv("OCRSERVE_LAYOUT", "fast")
    assert WithExtra().resolve(SettingsWithExtra()).layout == "fast"
    assert WithExtra(layout="best").resolve(SettingsWithExtra()).layout == "best"
