"""`ocrserve serve`'s faithful defaults (issue 26): Chandra 2 in bf16 with its launcher's flags, fp8 only
when asked, and a lean plan that fits an 80 GiB and a 24 GiB card. No GPU: a stand-in nvidia-smi on PATH
reports one, or --gpu-memory-gib gives its size."""

from __future__ import annotations

import json
import os
import shlex
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from ocrserve.cli import app
from ocrserve.profiles import load_profile
from ocrserve.vllm.plan import MAX_UTILIZATION, fitting_concurrency, plan_replica
from ocrserve.vllm.shape import ModelShape

UPSTREAM_MM = {"min_pixels": 3136, "max_pixels": 6291456}  # chandra-ocr 0.2.0, chandra/scripts/vllm.py


@pytest.fixture
def gpu_80(tmp_path: Path, monkeypatch) -> None:
    """One 80 GiB GPU, as a stand-in nvidia-smi on PATH reports it."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    smi = bin_dir / "nvidia-smi"
    smi.write_text("#!/bin/sh\necho '0, 81920, NVIDIA H100 80GB HBM3'\n")
    smi.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}")


def serve(*args: str) -> tuple[int, str, str, list[list[str]]]:
    """exit code, stdout, stderr and the vLLM command lines of `ocrserve serve --dry-run ARGS`."""
    r = CliRunner().invoke(app, ["serve", "--dry-run", "--vllm-bin", "vllm", *args])
    cmds = [shlex.split(line.split("] ", 1)[1]) for line in r.stdout.splitlines() if line.startswith("  [")]
    return r.exit_code, r.stdout, r.stderr, [c[c.index("vllm") :] for c in cmds]


def _flag(argv: list[str], name: str) -> str:
    assert argv.count(name) == 1, f"{name} appears {argv.count(name)} times in {argv}"
    return argv[argv.index(name) + 1]


def test_serve_defaults_to_chandra2_in_bf16_with_its_launchers_flags(gpu_80):
    code, out, err, (argv,) = serve()
    assert code == 0, (out, err)
    assert (
        out.startswith("chandra-2 (datalab-to/chandra-ocr-2) on GPU 0")
        and "memory plan (lean, bf16) on a 80.0 GiB" in out
    )
    assert argv[:3] == ["vllm", "serve", "datalab-to/chandra-ocr-2"]
    assert "--quantization" not in argv and "--kv-cache-dtype" not in argv and "fp8" not in argv
    assert json.loads(_flag(argv, "--mm-processor-kwargs")) == UPSTREAM_MM
    assert _flag(argv, "--dtype") == "bfloat16" and _flag(argv, "--served-model-name") == "chandra"
    assert _flag(argv, "--max-num-seqs") == "128" and "do not fit" not in err


def test_fp8_only_when_asked_and_the_launchers_flags_stay(gpu_80):
    code, out, err, (argv,) = serve("--quantization", "fp8")
    assert code == 0, (out, err)
    assert "memory plan (lean, fp8 weights + fp8 KV)" in out
    assert _flag(argv, "--quantization") == "fp8" and _flag(argv, "--kv-cache-dtype") == "fp8"
    assert json.loads(_flag(argv, "--mm-processor-kwargs")) == UPSTREAM_MM and _flag(argv, "--dtype") == "bfloat16"


def test_a_model_folder_is_planned_as_chandra2_unless_told(tmp_path: Path):
    code, out, _, (argv,) = serve("--model", str(tmp_path), "--gpu-memory-gib", "80")
    assert code == 0 and out.startswith(f"chandra-2 ({tmp_path.resolve()})"), out
    assert json.loads(_flag(argv, "--mm-processor-kwargs")) == UPSTREAM_MM
    code, out, _, (argv,) = serve("--model", str(tmp_path), "--profile", "chandra-1", "--gpu-memory-gib", "80")
    assert code == 0 and out.startswith("chandra-1 (") and "--dtype" not in argv, out


def test_chandra1_keeps_its_own_server_flags(gpu_80):
    code, out, _, (argv,) = serve("--model", "chandra-1", "--quantization", "fp8")
    assert code == 0 and argv[2] == "datalab-to/chandra", out
    assert json.loads(_flag(argv, "--mm-processor-kwargs")) == {"max_pixels": load_profile("chandra-1").max_pixels}
    assert "--dtype" not in argv


@pytest.mark.parametrize("model,gib,seqs", [("chandra-2", 80, 128), ("chandra-2", 24, None), ("chandra-1", 80, None)])
def test_the_lean_bf16_plan_fits_80_and_24_gib_cards(model, gib, seqs):
    """128 pages where they fit; else as many as fit in 90% of the card, with a note naming fp8 and its cost."""
    code, out, err, (argv,) = serve("--model", model, "--gpu-memory-gib", str(gib))
    assert code == 0, (out, err)
    total = float(next(ln for ln in out.splitlines() if ln.strip().startswith("total")).split()[1])
    assert total <= MAX_UTILIZATION * gib + 0.05
    n = int(_flag(argv, "--max-num-seqs"))
    if seqs:
        assert n == seqs and "do not fit" not in err
    else:
        assert 8 <= n < 128, n
        assert (
            f"the lean plan is sized for {n}" in err
            and "--quantization fp8 fits" in err
            and "changes the output" in err
        )


def test_a_card_too_small_for_one_page_in_bf16_names_fp8():
    code, out, err, _ = serve("--model", "chandra-1", "--gpu-memory-gib", "24")
    assert code == 2 and "vllm serve" not in out
    assert "not one page in flight fits in 90% of a 24.0 GiB GPU in bf16" in err and "--quantization fp8 fits" in err
    code, out, err, (argv,) = serve("--model", "chandra-1", "--gpu-memory-gib", "24", "--quantization", "fp8")
    assert code == 0 and int(_flag(argv, "--max-num-seqs")) >= 8, (out, err)


def test_an_explicit_concurrency_is_planned_as_asked():
    code, out, err, _ = serve("--model", "chandra-2", "--gpu-memory-gib", "24", "--concurrency", "128")
    assert code == 2 and "needs" in err and "but the GPU has 24.0 GiB" in err and "--quantization fp8" in err
    code, out, err, _ = serve(
        "--model", "chandra-2", "--gpu-memory-gib", "24", "--concurrency", "128", "--quantization", "fp8"
    )
    assert code == 2 and "--quantization fp8" not in err, err  # already fp8: not suggested again
    code, _, err, (argv,) = serve("--model", "chandra-2", "--gpu-memory-gib", "24", "--concurrency", "16")
    assert code == 0 and _flag(argv, "--max-num-seqs") == "16" and "do not fit" not in err


def test_fitting_concurrency_is_the_most_that_fits():
    c1 = load_profile("chandra-1")
    s1 = ModelShape.from_profile(c1)
    n = fitting_concurrency(c1, s1, 80.0)
    assert 0 < n < 128
    assert plan_replica(c1, s1, 80.0 * MAX_UTILIZATION, concurrency=n).total_gib <= 72.0
    with pytest.raises(ValueError):
        plan_replica(c1, s1, 80.0 * MAX_UTILIZATION, concurrency=n + 1)
    assert fitting_concurrency(c1, s1, 80.0, quantization="fp8") == 128
    assert fitting_concurrency(c1, s1, 16.0) == 0


def test_help_names_the_defaults_and_what_fp8_changes():
    cmd = typer.main.get_command(app).commands["serve"]
    opts = {p.name: p for p in cmd.params}
    assert opts["model"].default == "chandra-2" and opts["quantization"].default == "none"
    fp8 = " ".join(opts["quantization"].help.split())
    assert "changes the model's output" in fp8 and "not what Chandra was published or evaluated in" in fp8
    assert "4.36 vs 4.34 pages/s" in fp8
    root = typer.main.get_command(app).commands
    for cmd in (root["bench"].commands["run"], root["eval"]):  # as convert: what the server serves, else chandra-2
        model = {p.name: p for p in cmd.params}["model"]
        assert model.default is None and "else chandra-2" in model.help
