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
    _service: Service | None = field(default=None, init=False, repr=False)
    _worker: JobWorker | None = field(default=None, init=False, repr=False)

    # the service and the job worker are set by the app's lifespan, before any request is taken

    @property
    def service(self) -> Service:
        if self._service is None:
            raise RuntimeError("the API's service is not started (the app's lifespan sets it)")
        return self._service

    @service.setter
    def service(self, value: Service) -> None:
        self._service = value

    @property
    def worker(self) -> JobWorker:
        if self._worker is None:
            raise RuntimeError("the API's job worker is not started (the app's lifespan sets it)")
        return self._worker

    @worker.setter
    def worker(self, value: JobWorker) -> None:
        self._worker = value


def context(request: Request) -> Context:
    return request.app.state.ctx


async def caller(request: Request) -> str:
    """The caller's identity (a key's fingerprint, or "open" without keys); 401 without a valid key."""
    return context(request).auth.caller(request.headers.get("authorization"))
