"""The service's own errors. The domain code (service, jobs, worker, uploads) raises these; the HTTP layer
(`app.py`) maps each to a status code in one exception handler, so nothing below it imports FastAPI.

Each error has a `code` (stable, shown to clients as `code` beside `detail`) and a `reason` (the label of
`ocrserve_requests_rejected_total`, or None for errors that are not refusals of a request).
"""

from __future__ import annotations

from ocrserve.errors import OcrserveError


class ServiceError(OcrserveError):
    code = "error"
    reason: str | None = None

    def __init__(self, detail: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(detail)
        self.detail = detail
        self.headers = headers or {}


class BadInput(ServiceError):
    """The request is malformed: a body that cannot be read, a bad parameter."""

    code, reason = "bad_input", "bad_input"


class Unsupported(ServiceError):
    """The request's body is not of a type the endpoint takes."""

    code, reason = "unsupported", "bad_input"


class BadDocument(ServiceError):
    """The upload was read, but the document cannot be converted (not a document, empty, encrypted...)."""

    code, reason = "bad_document", "bad_input"


class TooLarge(ServiceError):
    """The upload is over the size limit."""

    code, reason = "too_large", "too_large"


class TooManyPages(ServiceError):
    """The upload selects more pages than one request may convert."""

    code, reason = "too_many_pages", "too_large"


class SlowUpload(ServiceError):
    """The body did not arrive within the upload deadline."""

    code, reason = "slow_upload", "slow_upload"


class Unauthorized(ServiceError):
    code, reason = "unauthorized", "unauthorized"

    def __init__(self, detail: str) -> None:
        super().__init__(detail, headers={"WWW-Authenticate": "Bearer"})


class NotFound(ServiceError):
    code = "not_found"


class Conflict(ServiceError):
    """The resource is not in a state for this (a job's result while it still runs)."""

    code = "conflict"


class Busy(ServiceError):
    """Refused for now (a key's concurrency, the job queue): retry after `retry_after` seconds."""

    code, reason = "busy", "too_many"

    def __init__(self, detail: str, retry_after: int) -> None:
        self.retry_after = max(1, int(retry_after))
        super().__init__(detail, headers={"Retry-After": str(self.retry_after)})


def shorten(text: str, limit: int = 64) -> str:
    """A client-given value echoed in an error, cut to `limit` characters (a 70 KB id is not echoed whole)."""
    return text if len(text) <= limit else text[:limit] + "…"
