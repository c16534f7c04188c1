"""What the routes share: the app's context (settings, store, limits, the service) and the caller
dependency (API keys). With `routes/` and `app.py`, the only modules that know about the HTTP framework."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from fastapi import Request

from ocrserve.api.auth import Auth
from ocrserve.api.jobs import JobStore
from ocrserve.api.limits import KeyLimiter
from ocrserve.api.metrics import Metrics
from ocrserve.settings import Settings

if TYPE_CHECKING:
    from ocrserve.api.service import Service
    from ocrserve.api.worker import JobWorker


@dataclass
class Context:
    settings: Settings
    auth: Auth
    store: JobStore
    metrics: Metrics
    limiter: KeyLimiter
    uploads: Path  # sync requests' upload folders
    service: Service = field(default=None)  # type: ignore[assignment]  # set by the lifespan
    worker: JobWorker = field(default=None)  # type: ignore[assignment]


def context(request: Request) -> Context:
    return request.app.state.ctx


async def caller(request: Request) -> str:
    """The caller's identity (a key's fingerprint, or "open" without keys); 401 without a valid key."""
    return context(request).auth.caller(request.headers.get("authorization"))
