"""Chandra's own client (`chandra-ocr`, Apache-2.0), both releases side by side, for differential tests.

0.2.0 (Chandra 2's) is installed in the test environment (the `test` extra); 0.1.8 (the last Chandra 1
release) lives in its own folder, `.venv/upstream/chandra-0.1.8` (`.ci/run` installs it there with
`pip install --no-deps --target`), since both are the package `chandra`. `client(version)` imports a
release's modules with that release's files first on the path and puts `sys.modules` back after, so
the two never mix; `chandra.model`'s __init__ (which imports the transformers backend) is skipped.
"""

from __future__ import annotations

import importlib
import os
import sys
import types
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FOLDERS = {"0.1.8": Path(os.environ.get("OCRSERVE_CHANDRA_018", ROOT / ".venv" / "upstream" / "chandra-0.1.8"))}
MODULES = (
    "chandra.settings",
    "chandra.prompts",
    "chandra.input",
    "chandra.model.schema",
    "chandra.model.util",
    "chandra.model.vllm",
)
# which release is each profile's reference client
RELEASE = {"chandra-1": "0.1.8", "chandra-2": "0.2.0"}


def _ours(name: str) -> bool:
    return name == "chandra" or name.startswith("chandra.")


@cache
def client(version: str) -> types.SimpleNamespace:
    """The release's modules, by their last name: .settings, .prompts, .input, .util, .vllm, .schema."""
    saved = {k: v for k, v in sys.modules.items() if _ours(k)}
    for k in saved:
        del sys.modules[k]
    folder = FOLDERS.get(version)
    if folder is not None and not (folder / "chandra").is_dir():
        raise AssertionError(
            f"chandra-ocr {version} is not installed in {folder}: run .ci/run (it installs it with "
            f"pip install --no-deps --target {folder} chandra-ocr=={version})"
        )
    if folder is not None:
        sys.path.insert(0, str(folder))
    try:
        pkg = importlib.import_module("chandra")
        model = types.ModuleType("chandra.model")  # skip its __init__: it imports the transformers backend
        model.__path__ = [str(Path(pkg.__file__).parent / "model")]
        sys.modules["chandra.model"] = model
        mods = {name.rsplit(".", 1)[-1]: importlib.import_module(name) for name in MODULES}
        from importlib.metadata import PathDistribution

        dist = PathDistribution(next(Path(pkg.__file__).parent.parent.glob("chandra_ocr-*.dist-info")))
        if dist.version != version:
            raise AssertionError(f"expected chandra-ocr {version}, found {dist.version} at {pkg.__file__}")
    finally:
        if folder is not None:
            sys.path.remove(str(folder))
        for k in [k for k in sys.modules if _ours(k)]:
            del sys.modules[k]
        sys.modules.update(saved)
    return types.SimpleNamespace(version=version, **mods)
