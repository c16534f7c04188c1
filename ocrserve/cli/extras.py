"""Optional extras: a command that needs one that is not installed says so in one line and exits 2.

The package is not on PyPI, so the hint installs from a clone (`pip install '.[api]'`).
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Callable

import typer

from ocrserve.errors import OcrserveError

# the extras of pyproject.toml and the modules that tell whether one is installed
EXTRAS: dict[str, tuple[str, ...]] = {
    "api": ("fastapi", "uvicorn", "multipart", "prometheus_client"),
    "hf": ("torch", "transformers", "accelerate"),
    "ray": ("ray", "fsspec"),
    "vllm": ("vllm",),
    "eval": ("rapidfuzz", "fuzzysearch"),
    "mcp": ("mcp",),
}
# a module of an extra that is not named in EXTRAS (pulled in by one that is)
_ALSO = {
    "python_multipart": "api",
    "starlette": "api",
    "huggingface_hub": "hf",
    "safetensors": "hf",
    "mcp_types": "mcp",
}


def install_hint(extra: str) -> str:
    return f"pip install '.[{extra}]' (in a clone of ocrserve; it is not on PyPI)"


def extra_of(module: str | None) -> str | None:
    """The extra a (possibly dotted) module name belongs to, or None."""
    top = (module or "").split(".", 1)[0]
    for extra, mods in EXTRAS.items():
        if top in mods:
            return extra
    return _ALSO.get(top)


def _missing(extra: str) -> str | None:
    for mod in EXTRAS[extra]:
        try:
            if importlib.util.find_spec(mod) is None:
                return mod
        except (ImportError, ValueError):  # a parent package missing, or a module left half-imported
            return mod
    return None


def message(what: str, extra: str, module: str) -> str:
    return f"error: {what} needs the [{extra}] extra ({module} is not installed): {install_hint(extra)}"


def require(extra: str, what: str) -> None:
    """Exit 2 with one line when `extra` is not installed (before the command starts anything)."""
    mod = _missing(extra)
    if mod is not None:
        typer.echo(message(what, extra, mod), err=True)
        raise typer.Exit(2)


def run_guarded(app: Callable[[], object]) -> None:
    """Run the CLI; an import of a missing extra's module anywhere in a command ends in one line and exit 2
    (the safety net behind the commands' own require() checks), and an OcrserveError no command caught in
    its one line and exit 1."""
    try:
        app()
    except OcrserveError as e:  # one of ours no command caught: its one line, not a traceback
        print(f"error: {e}", file=sys.stderr)
        raise SystemExit(1) from None
    except ModuleNotFoundError as e:
        extra = extra_of(e.name)
        if extra is None:
            raise
        cmd = next((a for a in sys.argv[1:] if not a.startswith("-")), "")
        print(message(f"ocrserve {cmd}".strip(), extra, (e.name or "?").split(".", 1)[0]), file=sys.stderr)
        raise SystemExit(2) from None
