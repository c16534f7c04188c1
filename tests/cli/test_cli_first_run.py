"""The first ten minutes (#18): --version, plain help, one-line hints for missing extras, profiles."""

from __future__ import annotations

import re
import tomllib
from importlib.metadata import version

import pytest

import ocrserve
from ocrserve.cli.extras import run_guarded
from tests.cli.support import ROOT, cli

SAMPLE = str(ROOT / "ocrserve" / "samples" / "sample.pdf")


# ------------------------------------------------------------------------------------------ --version


@pytest.mark.parametrize("flag", ["--version", "-V"])
def test_version(flag):
    r = cli(flag)
    assert r.returncode == 0, r.stderr
    assert r.stdout == f"ocrserve {version('ocrserve')}\n" == f"ocrserve {ocrserve.__version__}\n"


# ------------------------------------------------------------------------------------------ help


@pytest.mark.parametrize("args", [[], ["convert"], ["serve"], ["api"], ["bench"], ["eval"], ["profiles"]])
def test_help_reads_like_a_conventional_cli(args):
    r = cli(*args, "--help")
    assert r.returncode == 0, r.stderr
    text = r.stdout
    for bad in ("<bool>", "<list", "{", "<str>", "<int>", "<float>", "<path>"):
        assert bad not in text, (bad, text)
    assert "Usage: " in text


def test_convert_help_names_values_the_usual_way():
    text = cli("convert", "--help").stdout
    assert re.search(r"Usage: .*convert \[OPTIONS\] INPUTS\.\.\.", text), text
    assert re.search(r"--output\s+-o\s+TEXT", text) and re.search(r"--concurrency\s+-c\s+INTEGER", text)
    assert re.search(r"--ray\s+ADDRESS", text)
    force = next(ln for ln in text.splitlines() if "--force" in ln)
    assert re.search(r"--force\s+--no-force\s+redo documents", force), force  # a flag pair: no value column


# ------------------------------------------------------------------------------------------ extras


def _without(*modules: str) -> str:
    """A shim that makes modules unimportable (as when the extra is not installed)."""
    return "".join(f"sys.modules[{m!r}] = None\n" for m in modules)


@pytest.mark.parametrize(
    "args,missing,extra",
    [
        (["api", "--port", "8799"], ["fastapi"], "api"),
        (["api", "--port", "8799"], ["uvicorn"], "api"),
        (
            ["serve", "--gpu-memory-gib", "80", "--api-port", "8799", "--vllm-bin", "/nonexistent/vllm"],
            ["fastapi"],
            "api",
        ),
        (["eval", "nowhere", "-c", "nowhere"], ["rapidfuzz"], "eval"),
        (["convert", SAMPLE, "--engine", "hf", "-o", "OUT"], ["torch"], "hf"),
        (["convert", SAMPLE, "--ray", "local", "-o", "OUT"], ["ray"], "ray"),
    ],
)
def test_a_missing_extra_is_one_line_and_exit_2(args, missing, extra, tmp_path):
    args = [str(tmp_path / "out") if a == "OUT" else a for a in args]
    r = cli(*args, shim=_without(*missing), cwd=tmp_path)
    assert r.returncode == 2, (r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert f"[{extra}] extra" in lines[0] and f"pip install '.[{extra}]'" in lines[0], lines[0]
    assert "Traceback" not in r.stdout + r.stderr


def test_the_guard_turns_a_deep_import_of_an_extra_into_one_line(capsys, monkeypatch):
    monkeypatch.setattr("sys.argv", ["ocrserve", "convert", "x.pdf"])

    def needs_ray_data():
        raise ModuleNotFoundError("No module named 'ray.data'", name="ray.data")

    with pytest.raises(SystemExit) as e:
        run_guarded(needs_ray_data)
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert (
        err == "error: ocrserve convert needs the [ray] extra (ray is not installed): "
        "pip install '.[ray]' (in a clone of ocrserve; it is not on PyPI)\n"
    )

    def other():
        raise ModuleNotFoundError("No module named 'nothing_of_ours'", name="nothing_of_ours")

    with pytest.raises(ModuleNotFoundError):  # not an extra: a real bug, shown as it is
        run_guarded(other)


# ------------------------------------------------------------------------------------------ packaging


def test_license_is_an_spdx_string():
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert meta["project"]["license"] == "Apache-2.0"
    req = [r for r in meta["build-system"]["requires"] if r.startswith("setuptools")]
    assert req and int(re.search(r">=(\d+)", req[0]).group(1)) >= 77  # the SPDX form needs setuptools 77


# ------------------------------------------------------------------------------------------ profiles


def test_profiles_has_headers_and_what_the_readme_lists():
    from ocrserve.profiles import PROFILES

    r = cli("profiles")
    assert r.returncode == 0, r.stderr
    header, *rows = r.stdout.rstrip("\n").splitlines()
    # the README: "checkpoint, prompt, bbox scale/format, labels, pixel budget, sampling"
    for col in ("PROFILE", "CHECKPOINT", "PROMPT", "BBOX", "LABELS", "PIXEL BUDGET", "SAMPLING"):
        assert col in header, header
    starts = [
        header.index(c) for c in ("PROFILE", "CHECKPOINT", "PROMPT", "BBOX", "LABELS", "PIXEL BUDGET", "SAMPLING")
    ]
    assert len(rows) == len(PROFILES)
    for row, p in zip(rows, PROFILES.values()):
        cells = [row[a:b].strip() for a, b in zip(starts, starts[1:] + [None])]
        assert cells[0] == p.name and cells[1] == p.checkpoint and cells[2] == p.prompt_file
        assert cells[3] == f"0-{p.bbox_scale} {p.bbox_format}" and cells[4] == str(len(p.labels))
        assert f"{p.max_pixels / 1e6:.2f} MP" in cells[5] and f"{p.pdf_dpi:g} dpi" in cells[5]
        assert f"temp {p.sampling.temperature:g} top_p {p.sampling.top_p:g}" in cells[6]
        assert f"temp {p.retry_sampling.temperature:g} top_p {p.retry_sampling.top_p:g}" in cells[6]
