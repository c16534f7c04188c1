"""What a run reports, whichever scheduler ran it: one DocResult a document, a RunSummary, events."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

from ocrserve.document import Document

log = logging.getLogger(__name__)

# on_event(kind, data): run_start, doc_start, page_done, doc_done, run_done
Event = Callable[[str, dict[str, Any]], None]


class DocStatus(StrEnum):
    """A document's outcome in a run: a page status of its own (ok, fallback, failed), or skipped (complete)."""

    OK = "ok"
    FALLBACK = "fallback"
    FAILED = "failed"
    SKIPPED = "skipped"


@dataclass
class DocResult:
    name: str
    path: str
    status: DocStatus
    error: str | None = None
    document: Document | None = None
    output: Path | None = None
    pages: int = 0
    pages_failed: int = 0
    pages_fallback: int = 0

    def __post_init__(self) -> None:
        self.status = DocStatus(self.status)  # a page status or a plain string of one


@dataclass
class RunSummary:
    results: list[DocResult] = field(default_factory=list)
    elapsed_s: float = 0.0
    interrupted: bool = False
    documents: int = 0  # documents the run was given

    @property
    def failed(self) -> list[DocResult]:
        return [r for r in self.results if r.status == "failed"]

    @property
    def pages(self) -> int:
        return sum(r.pages for r in self.results if r.status != "skipped")

    @property
    def left(self) -> int:
        """Documents an interrupted run did not finish (run again to do them)."""
        return max(0, self.documents - len(self.results))

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for r in self.results:
            out[r.status] = out.get(r.status, 0) + 1
        return out


def emitter(on_event: Event | None) -> Callable[..., None]:
    """emit(kind, **data): calls on_event; a failing progress display never breaks a run."""

    def emit(kind: str, **data: Any) -> None:
        if on_event is not None:
            try:
                on_event(kind, data)
            except Exception:
                log.exception("event handler failed")

    return emit


def document_result(name: str, path: str, doc: Document) -> DocResult:
    """The DocResult of an assembled document (before it is written)."""
    pages = doc.pages
    return DocResult(
        name=name,
        path=path,
        status=DocStatus(doc.status),  # a page status names a document status too
        document=doc,
        pages=len(pages),
        pages_failed=sum(p.status == "failed" for p in pages),
        pages_fallback=sum(p.status == "fallback" for p in pages),
        error="; ".join(f"page {p.index + 1}: {p.error}" for p in pages if p.status == "failed")[:2000] or None,
    )
