"""ConvertOptions: one typed set of options for the CLI, the Python API and both schedulers."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from ocrserve.engines import EngineError
from ocrserve.pipeline.local import Converter
from ocrserve.pipeline.options import ConvertOptions, OptionsError
from ocrserve.settings import Settings


def test_unknown_and_bad_options_are_errors_naming_them():
    with pytest.raises(OptionsError, match="unknown option 'pagez'"):
        ConvertOptions.build(pagez="1")
    with pytest.raises(OptionsError, match="option 'concurrency'"):
        ConvertOptions.build(concurrency=0)
    with pytest.raises(OptionsError, match="unknown option 'colour'"):
        Converter(colour="red")  # the Python API says so too, before anything starts


def test_engine_rule_and_defaults_come_from_settings_in_one_place():
    s = Settings(fallback=False, keep_headers_footers=True, model="chandra-2", prefetch_pages=7)
    r = ConvertOptions().resolve(s)
    assert (r.engine, r.model, r.fallback, r.keep_headers_footers, r.prefetch_pages) == (
        "lite",
        "chandra-2",
        False,
        True,
        7,
    )
    assert ConvertOptions(server="http://h:8000").resolve(Settings()).engine == "openai"
    assert ConvertOptions().resolve(Settings(server="http://h:8000")).engine == "openai"
    assert ConvertOptions(engine="lite", server="http://h:8000").resolve(Settings()).engine == "lite"
    assert ConvertOptions(fallback=True).resolve(s).fallback is True  # a choice beats the setting
    with pytest.raises(EngineError, match="unknown engine 'gpt'"):
        ConvertOptions(engine="gpt").resolve(Settings())


def test_formats_always_include_the_json_that_marks_completeness():
    assert ConvertOptions().formats == ("md", "html", "json")
    assert ConvertOptions.build(formats="md").formats == ("md", "json")
    with pytest.raises(OptionsError, match="formats"):
        ConvertOptions.build(formats="docx")


def test_engine_kwargs_hold_only_what_was_set():
    o = ConvertOptions(server="http://h:8000", max_tokens=64, concurrency=8, engine_options={"stream": True})
    assert o.engine_kwargs() == {"server": "http://h:8000", "max_tokens": 64, "concurrency": 8, "stream": True}
    assert ConvertOptions().engine_kwargs() == {}


def test_of_layers_keywords_over_options():
    base = ConvertOptions(pages="1-2", force=True)
    o = ConvertOptions.of(base, "lite", pages="3")
    assert (o.pages, o.force, o.engine) == ("3", True, "lite")
    assert ConvertOptions.of(base) is base


def test_cli_reports_bad_options_with_exit_2(tmp_path):
    from ocrserve.cli import app

    res = CliRunner().invoke(app, ["convert", str(tmp_path), "-o", str(tmp_path / "o"), "--engine", "gpt"])
    assert res.exit_code == 2 and "unknown engine 'gpt'" in res.output
    res = CliRunner().invoke(app, ["convert", str(tmp_path), "-o", str(tmp_path / "o"), "-c", "0"])
    assert res.exit_code == 2 and "concurrency" in res.output


def test_an_empty_variable_means_unset(monkeypatch):
    monkeypatch.setenv("OCRSERVE_API_KEYS_FILE", "")
    monkeypatch.setenv("OCRSERVE_SERVER", " ")
    s = Settings()
    assert s.api_keys_file is None and s.server is None  # not Path('.') (a folder), not a blank URL
    assert ConvertOptions().resolve(s).engine == "lite"


def _sample(name: str, default):
    """A value for a Settings knob other than its default."""
    if name == "engine":
        return "hf"
    if name == "model":
        return "chandra-1"
    if isinstance(default, bool):
        return not default
    if isinstance(default, int) or name == "concurrency":
        return (default or 0) + 3
    return f"http://{name}.example:8000" if name == "server" else f"x-{name}"


def test_each_option_backed_by_settings_takes_its_knob_when_not_chosen():
    specs = ConvertOptions.declared()
    backed = [n for n, spec in specs.items() if spec.env]
    assert backed  # tests/cli/test_cli_declared_options.py checks which, and that Settings has each
    for name in backed:
        value = _sample(name, Settings.model_fields[name].default)
        s = Settings(**{"server": "http://h:8000", name: value})  # a server: openai, which takes every one of them
        assert getattr(ConvertOptions().resolve(s), name) == value, name
        default = getattr(ConvertOptions().resolve(Settings(server="http://h:8000")), name)
        if default is not None:  # a choice beats the setting, even a choice of the usual value
            assert getattr(ConvertOptions.build(**{name: default}).resolve(s), name) == default, name


def test_server_settings_reach_only_an_engine_that_takes_them():
    s = Settings(api_key="k", served_model="m", concurrency=32)
    lite = ConvertOptions().resolve(s)  # no server: lite, which takes none of them (not an error)
    assert (lite.engine, lite.api_key, lite.served_model) == ("lite", None, None)
    assert lite.engine_kwargs() == {"concurrency": 32}  # the pipeline's: an engine without it is built without it
    served = ConvertOptions(server="http://h:8000").resolve(s)
    assert (served.engine, served.api_key, served.served_model, served.concurrency) == ("openai", "k", "m", 32)


def test_zero_concurrency_in_the_environment_means_derive_it(monkeypatch):
    monkeypatch.setenv("OCRSERVE_CONCURRENCY", "0")
    assert Settings().concurrency is None and ConvertOptions().resolve(Settings()).concurrency is None
    monkeypatch.setenv("OCRSERVE_CONCURRENCY", "12")
    assert ConvertOptions().resolve(Settings()).concurrency == 12


def test_the_python_api_takes_the_declared_options_by_name():
    import ocrserve

    with pytest.raises(OptionsError, match="unknown option 'no_images'"):  # the CLI's flag is not the option's name
        ocrserve.convert([], no_images=True)
    with pytest.raises(OptionsError, match="option 'max_retries'"):
        ocrserve.convert([], options=ConvertOptions(), max_retries=-1)
    assert "figures" in ConvertOptions.declared() and ocrserve.convert([], figures=False, engine="lite") == []
