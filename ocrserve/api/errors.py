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

    def __init_subclass__(cls, code: str | None = None, reason: str | None = None, **kwargs) -> None:
        """`class TooLarge(ServiceError, code="too_large", reason="too_large")`: a kind with its code and reason."""
        super().__init_subclass__(**kwargs)
        if code is not None:
            cls.code = code
        if reason is not None:
            cls.reason = reason

    def __init__(self, detail: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(detail)
        self.detail = detail
        self.headers = headers or {}


class BadInput(ServiceError, code="bad_input", reason="bad_input"):
    """The request is malformed: a body that cannot be read, a bad parameter."""


class Unsupported(ServiceError, code="unsupported", reason="bad_input"):
    """The request's body is not of a type the endpoint takes."""


class BadDocument(ServiceError, code="bad_document", reason="bad_input"):
    """The upload was read, but the document cannot be converted (not a document, empty, encrypted...)."""


class TooLarge(ServiceError, code="too_large", reason="too_large"):
    """The upload is over the size limit."""


class TooManyPages(ServiceError, code="too_many_pages", reason="too_large"):
    """The upload selects more pages than one request may convert."""


class SlowUpload(ServiceError, code="slow_upload", reason="slow_upload"):
    """The body did not arrive within the upload deadline."""


class Unauthorized(ServiceError, code="unauthorized", reason="unauthorized"):
    def __init__(self, detail: str) -> None:
        super().__init__(detail, headers={"WWW-Authenticate": "Bearer"})


class NotFound(ServiceError, code="not_found"):
    """No such resource (a job, a page, a document)."""


class Conflict(ServiceError, code="conflict"):
    """The resource is not in a state for this (a job's result while it still runs)."""


class Busy(ServiceError, code="busy", reason="too_many"):
    """Refused for now (a key's concurrency, the job queue): retry after `retry_after` seconds."""

    def __init__(self, detail: str, retry_after: int) -> None:
        self.retry_after = max(1, int(retry_after))
        super().__init__(detail, headers={"Retry-After": str(self.retry_after)})


def shorten(text: str, limit: int = 64) -> str:
    """A client-given value echoed in an error, cut to `limit` characters (a 70 KB id is not echoed whole)."""
    return text if len(text) <= limit else text[:limit] + "…"
