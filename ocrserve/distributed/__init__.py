"""Distributed conversion on a Ray cluster (`ocrserve convert --ray`). Needs the `ray` extra."""

from __future__ import annotations

from typing import Any


def run_ray_convert(*args: Any, **kwargs: Any):
    """See ocrserve.distributed.ray_convert.run_ray_convert (imported lazily: Ray is optional)."""
    from .ray_convert import run_ray_convert as _run

    return _run(*args, **kwargs)


__all__ = ["run_ray_convert"]
