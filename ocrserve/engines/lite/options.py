"""The lite engine's options (its Options model; create_engine fills the unset ones from Settings)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from ocrserve.engines.base import EngineOptions
from ocrserve.ingest import pool


class LiteEngineOptions(EngineOptions):
    """The lite engine's options."""

    settings_defaults = {
        "workers": "lite_workers",
        "warm": "lite_warm",
        "timeout": "request_timeout",
        "mp_start": "mp_start",
    }

    workers: int | None = Field(
        None, ge=0, description="worker processes, one page each at a time (unset or 0: the CPUs it may use, at most 8)"
    )
    warm: bool | None = Field(
        None,
        description="load RapidOCR when a worker starts (else on the first page that needs OCR; unset: "
        "Settings.lite_warm, a conversion loads it when needed)",
    )
    timeout: float | None = Field(
        None,
        gt=0,
        description="seconds a page may run on its worker; then it fails and "
        "the worker is killed and replaced (unset: 600)",
    )
    ocr: Literal["auto", "always", "never"] = Field(
        "auto",
        description="RapidOCR where the text layer is not usable (auto), on every page, or never (text layer only)",
    )
    trust_invisible: bool = Field(True, description="use invisible text (an OCR layer) as the page's text")
    mp_start: str | None = Field(
        None,
        description="how worker processes start: fork, spawn or forkserver (unset: "
        "the platform's default, fork on Linux)",
    )


def default_workers(workers: int | None) -> int:
    """The worker processes for `workers` (unset or 0: the CPUs it may use, at most 8): the render pool's rule."""
    return pool.default_workers(int(workers or 0), cap=8)
