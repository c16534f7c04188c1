"""What a run reports, whichever scheduler ran it: one DocResult a document, a RunSummary, events."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

from ocrserve.document import Document
from ocrserve.errors import OcrserveError
from ocrserve.ingest.sources import InputProblem

log = logging.getLogger(__name__)

# on_event(kind, data): run_start, doc_start, page_done, doc_done, run_done
Event = Callable[[str, dict[str, Any]], None]


class DocStatus(StrEnum):
    """A document's outcome in a run: a page status of its own (ok, fallback: some pages came from the
    fallback, failed), skipped (complete already), updated (complete already; the formats it lacked were
    rendered from its JSON, no page converted), or unsupported (a file in a folder that is no document
    ocrserve reads: named with the reason, not converted)."""

    OK = "ok"
    FALLBACK = "fallback"
    FAILED = "failed"
    SKIPPED = "skipped"
    UPDATED = "updated"
    UNSUPPORTED = "unsupported"


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
    redo: str | None = None  # why pages an earlier run wrote were converted again (they came from the fallback)

    @property
    def input(self) -> str:
        """The input file this result is for (the Python API's name for `path`)."""
        return self.path

    @property
    def ok(self) -> bool:
        """Converted (or complete already) with no page failed."""
        return self.status not in (DocStatus.FAILED, DocStatus.UNSUPPORTED)

    @classmethod
    def of_problem(cls, p: InputProblem) -> DocResult:
        """What an input holds that is no document it can read: failed, or unsupported, with the reason."""
        return cls(name=p.name, path=str(p.path), status=DocStatus(p.status), error=p.reason)

    def __post_init__(self) -> None:
        self.status = DocStatus(self.status)  # a page status or a plain string of one


ConversionResult = DocResult  # the Python API's name: one per document, ocrserve.convert() returns them


class ConversionError(OcrserveError):
    """convert(..., raises_on_error=True) when a document failed: `results` holds every document's."""

    def __init__(self, results: list[DocResult]) -> None:
        self.results = results
        failed = [r for r in results if r.status == DocStatus.FAILED]
        first = f"{failed[0].path}: {failed[0].error}" if failed else ""
        more = f" (and {len(failed) - 1} more)" if len(failed) > 1 else ""
        super().__init__(f"{len(failed)} of {len(results)} documents failed: {first}{more}")


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
    def degraded(self) -> list[DocResult]:
        """Documents written with pages the fallback wrote (the model failed them): a rerun with the
        model converts those again."""
        return [r for r in self.results if r.status == DocStatus.FALLBACK]

    @property
    def unsupported(self) -> list[DocResult]:
        return [r for r in self.results if r.status == DocStatus.UNSUPPORTED]

    @property
    def nothing_converted(self) -> bool:
        """The run found no document to convert (none, or only unsupported files): not even a complete one."""
        return not self.interrupted and all(r.status == DocStatus.UNSUPPORTED for r in self.results)

    @property
    def pages(self) -> int:
        return sum(r.pages for r in self.results if r.status not in ("skipped", "updated"))

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
