"""`ocrserve serve` attaches only to a server that is what it would start (issue #29, item 6): the same
served name, the same model and the same max_model_len in its /v1/models card. Anything else healthy
on the port (here the stand-in vLLM, tests/fakes/standin.py) is refused with one line, exit 1."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.support.replicas import serve_argv

ROOT = Path(__file__).resolve().parents[2]


def run_serve(tmp_path: Path, port: int) -> tuple[int | None, str, str]:
    """(exit code or None if it was still running after 60 s, stdout, stderr)."""
    p = subprocess.Popen(
        serve_argv(tmp_path / "logs", "--port", str(port)),
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        out, err = p.communicate(timeout=60)
        return p.returncode, out, err
    except subprocess.TimeoutExpired:  # it attached and serves on
        p.kill()
        out, err = p.communicate()
        return None, out, err


@pytest.mark.parametrize(
    "config, differs",
    [
        ({}, "max_model_len 16384"),  # chandra-1's checkpoint and name, another context length
        ({"model": "other"}, "serves other"),  # another served name
        ({"root": "someone/another-model", "max_model_len": 14848}, "someone/another-model"),  # another model
    ],
)
def test_serve_refuses_a_healthy_server_that_is_not_its_own(tmp_path, standin, config, differs):
    standin.control(**config)
    code, out, err = run_serve(tmp_path, standin.port)
    assert code == 1 and "ready" not in out, (code, out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith(f"error: replica-0: a server already answers at {standin.root}"), err
    assert differs in lines[0] and "stop it or pick another --port" in lines[0]
    assert standin.alive()  # not ours to stop
