"""Running the real `ocrserve` command in a subprocess, optionally with a shim run first."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

_RUN = """
import sys
{shim}
from ocrserve.cli import main
sys.argv = ["ocrserve", *sys.argv[1:]]
main()
"""


def mkdir_fails(error: str, when: str) -> str:
    """A shim: os.mkdir raises OSError(errno.`error`) for a path `p` (a str) where the Python expression `when`
    is true (as root, chmod would not refuse), in the forked workers too."""
    return f"""
import errno, os
_real_mkdir = os.mkdir
def _mkdir(path, *a, **kw):
    p = os.fsdecode(path)
    if {when}:
        raise OSError(errno.{error}, os.strerror(errno.{error}), p)
    return _real_mkdir(path, *a, **kw)
os.mkdir = _mkdir
"""


def cli(*args: str, shim: str = "", cwd: Path | None = None, timeout: float = 240) -> subprocess.CompletedProcess:
    """`ocrserve ARGS` as a user runs it; `shim` is Python run before the CLI is imported (to make a
    module unimportable, or a folder unreadable even for root)."""
    return subprocess.run(
        [sys.executable, "-c", _RUN.format(shim=shim), *args],
        cwd=cwd or ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=_env(),
    )


def cli_async(*args: str, shim: str = "", cwd: Path | None = None) -> subprocess.Popen:
    """cli() started, not waited for (communicate() for its output)."""
    return subprocess.Popen(
        [sys.executable, "-c", _RUN.format(shim=shim), *args],
        cwd=cwd or ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(),
    )


def _env() -> dict[str, str]:
    import os

    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env["COLUMNS"] = "120"  # help text wraps the same under every runner (xdist workers have 80)
    return env
