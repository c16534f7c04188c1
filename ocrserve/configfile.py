"""The config file (`--config FILE` or OCRSERVE_CONFIG): TOML, one checked-in file for convert, serve and api.

Top-level keys are Settings knobs (the OCRSERVE_* variables without the prefix, lower case); the tables
`[convert]`, `[serve]` and `[api]` hold a command's options by their names. A file's value sits below
the environment and the command line: flag > env > file > default. Settings reads the top-level keys
through its own source, placed after the environment (settings.py); the commands read their table
(cli/configopt.py). An unknown key or table is an error naming the file, the key and the keys known.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ocrserve.errors import OcrserveError

ENV = "OCRSERVE_CONFIG"
SECTIONS = ("convert", "serve", "api")


class ConfigError(OcrserveError, ValueError):
    """A config file that is missing, not TOML, or has a key nobody knows."""


def config_path(given: str | Path | None = None) -> Path | None:
    """The file named by --config, else by OCRSERVE_CONFIG, else None (no file)."""
    text = str(given) if given else os.environ.get(ENV, "").strip()
    return Path(text).expanduser() if text else None


def load(path: Path) -> dict[str, Any]:
    """The file's tables; a missing or unreadable file, or bad TOML -> ConfigError naming the file."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"{path}: config file not found") from None
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError(f"{path}: cannot read the config file: {e}") from None
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{path}: not valid TOML: {e}") from None
    for name in SECTIONS:
        if name in data and not isinstance(data[name], dict):
            raise ConfigError(f"{path}: [{name}] must be a table")
    return data


def top_level(path: Path, known: Iterable[str]) -> dict[str, Any]:
    """The top-level keys (Settings knobs), checked against `known`."""
    data = {k: v for k, v in load(path).items() if k not in SECTIONS}
    return _checked(path, data, known, "at the top level")


def section(path: Path, name: str, known: Iterable[str]) -> dict[str, Any]:
    """Table `[name]`, its keys checked against `known` ({} when the file has no such table)."""
    return _checked(path, dict(load(path).get(name, {})), known, f"in [{name}]")


def env_set(name: str) -> bool:
    """Whether OCRSERVE_<NAME> is in the environment (it then beats the file)."""
    return f"OCRSERVE_{name}".upper() in {k.upper() for k in os.environ}


def _checked(path: Path, data: dict[str, Any], known: Iterable[str], where: str) -> dict[str, Any]:
    names = list(known)
    unknown = [k for k in data if k not in names]
    if unknown:
        keys = ", ".join(repr(k) for k in unknown)
        word = "key" if len(unknown) == 1 else "keys"
        raise ConfigError(f"{path}: unknown {word} {keys} {where} (known: {', '.join(sorted(names))})")
    return data
