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
    pages_resumed: int = 0  # of `pages`, those an earlier run (or the job's own store) had: kept, not converted now
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


NAMED = 500  # a run that keeps no results names this many documents of each status it lists at the end
LISTED = (DocStatus.FAILED, DocStatus.FALLBACK, DocStatus.UNSUPPORTED)  # the statuses the CLI lists at the end


@dataclass
class RunSummary:
    """What a run did. `results`: every document's DocResult, in input order (the Python API returns
    them). A run that keeps none (`keep_results=False`: the CLI, whose memory must stay flat over a
    million documents) only counts each finished document (add), and keeps the first NAMED documents
    that failed, came partly from the fallback or are unsupported (their names and reasons, for the
    summary), in input order; `unnamed(status)` says how many more there were."""

    results: list[DocResult] = field(default_factory=list)
    elapsed_s: float = 0.0
    interrupted: bool = False
    documents: int = 0  # documents the run was given
    keep_results: bool = True
    _places: list[int] = field(default_factory=list, repr=False)  # each kept result's input number
    _counts: dict[str, int] = field(default_factory=dict, repr=False)  # documents not in results, by status
    _pages: int = field(default=0, repr=False)  # their pages
    _pages_fallback: int = field(default=0, repr=False)  # their pages from the fallback
    _pages_resumed: int = field(default=0, repr=False)  # their pages kept from an earlier run
    _named: dict[str, list[tuple[int, DocResult]]] = field(default_factory=dict, repr=False)

    def add(self, r: DocResult, n: int = 0) -> None:
        """A finished document, the run's input number `n`: kept in `results`, or counted (named when
        it is to be listed, up to NAMED of a status) by a run that keeps no results."""
        if self.keep_results:
            self.results.append(r)
            self._places.append(n)
            return
        self._counts[r.status] = self._counts.get(r.status, 0) + 1
        if r.status not in (DocStatus.SKIPPED, DocStatus.UPDATED):
            self._pages += r.pages
            self._pages_resumed += r.pages_resumed
        if r.status == DocStatus.FALLBACK:
            self._pages_fallback += r.pages_fallback
        if r.status in LISTED and len(named := self._named.setdefault(r.status, [])) < NAMED:
            r.document = None
            named.append((n, r))

    def finish(self) -> None:
        """The kept results in input order (as the inputs were given, not as they finished)."""
        if len(self._places) == len(self.results):
            order = sorted(range(len(self.results)), key=self._places.__getitem__)
            self.results, self._places = [self.results[i] for i in order], [self._places[i] for i in order]

    def _of(self, status: DocStatus) -> list[DocResult]:
        return [r for r in self.results if r.status == status] + [
            r for _, r in sorted(self._named.get(status, []), key=lambda t: t[0])
        ]

    def unnamed(self, status: DocStatus) -> int:
        """Documents of this status the run counted but does not name (past NAMED, keep_results False)."""
        return self._counts.get(status, 0) - len(self._named.get(status, []))

    @property
    def finished(self) -> int:
        """Documents the run finished (converted, skipped, updated, failed, unsupported)."""
        return len(self.results) + sum(self._counts.values())

    @property
    def failed(self) -> list[DocResult]:
        return self._of(DocStatus.FAILED)

    @property
    def degraded(self) -> list[DocResult]:
        """Documents written with pages the fallback wrote (the model failed them): a rerun with the
        model converts those again."""
        return self._of(DocStatus.FALLBACK)

    @property
    def unsupported(self) -> list[DocResult]:
        return self._of(DocStatus.UNSUPPORTED)

    @property
    def nothing_converted(self) -> bool:
        """The run found no document to convert (none, or only unsupported files): not even a complete one."""
        counts = self.counts()
        return not self.interrupted and counts.get(DocStatus.UNSUPPORTED, 0) == sum(counts.values())

    @property
    def pages(self) -> int:
        return sum(r.pages for r in self.results if r.status not in ("skipped", "updated")) + self._pages

    @property
    def pages_resumed(self) -> int:
        """Of `pages`, those kept from an earlier run's output (a partial rerun), not converted now."""
        kept = sum(r.pages_resumed for r in self.results if r.status not in ("skipped", "updated"))
        return kept + self._pages_resumed

    @property
    def pages_fallback(self) -> int:
        """Pages the fallback wrote, over the documents that have them."""
        return sum(r.pages_fallback for r in self.results if r.status == DocStatus.FALLBACK) + self._pages_fallback

    @property
    def left(self) -> int:
        """Documents an interrupted run did not finish (run again to do them)."""
        return max(0, self.documents - self.finished)

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = dict(self._counts)
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
