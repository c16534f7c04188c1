"""What the routes share: the app's context (settings, store, limits, the service) and the caller
dependency (API keys). With `routes/` and `app.py`, the only modules that know about the HTTP framework."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Generic, TypeVar, overload

from fastapi import Request

from ocrserve.api.auth import Auth
from ocrserve.api.jobs import JobStore
from ocrserve.api.limits import KeyLimiter
from ocrserve.api.metrics import Metrics
from ocrserve.api.service import Service
from ocrserve.api.worker import JobWorker
from ocrserve.settings import Settings

T = TypeVar("T")


class SetAtStart(Generic[T]):
    """A part of the context the app's lifespan sets, before any request is taken: reading it before is
    a RuntimeError naming it (`what`)."""

    def __init__(self, what: str) -> None:
        self.what = what

    def __set_name__(self, owner: type, name: str) -> None:
        self.key = name

    @overload
    def __get__(self, obj: None, owner: type) -> SetAtStart[T]: ...
    @overload
    def __get__(self, obj: object, owner: type) -> T: ...
    def __get__(self, obj: object | None, owner: type) -> SetAtStart[T] | T:
        if obj is None:
            return self
        try:
            return obj.__dict__[self.key]
        except KeyError:
            raise RuntimeError(f"the API's {self.what} is not started (the app's lifespan sets it)") from None

    def __set__(self, obj: object, value: T) -> None:
        obj.__dict__[self.key] = value


@dataclass
class Context:
    settings: Settings
    auth: Auth
    store: JobStore
    metrics: Metrics
    limiter: KeyLimiter
    uploads: Path  # sync requests' upload folders
    # the service and the job worker are set by the app's lifespan, before any request is taken
    service = SetAtStart[Service]("service")
    worker = SetAtStart[JobWorker]("job worker")


def context(request: Request) -> Context:
    return request.app.state.ctx


async def caller(request: Request) -> str:
    """The caller's identity (a key's fingerprint, or "open" without keys); 401 without a valid key."""
    return context(request).auth.caller(request.headers.get("authorization"))
