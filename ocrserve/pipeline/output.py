"""Per-document output: OUT/<name>/<basename>.{md,html,json} + images/, written atomically.
With formats: also <basename>.pdf (searchable PDF) and <basename>.chunks.jsonl (retrieval chunks).

Pages' figure crops go to a hidden staging folder as pages finish; when the last page is back the
Markdown, HTML and JSON are written there and the folder is swapped into place with a rename, so
an interrupted run never leaves a half-written document that looks complete. A document counts as
done when its JSON is there, its source hash matches, it holds every wanted page, and no page
failed (is_complete: the one rule, for the local and the Ray scheduler alike).
"""

from __future__ import annotations

import json
import os
import shutil
import uuid
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable

from ocrserve.document import Document
from ocrserve.ingest.naming import path_hash, same_file
from ocrserve.ingest.sources import SourceFile
from ocrserve.render import render_html, render_json, render_markdown
from ocrserve.export.formats import DEFAULT_FORMATS, SUFFIXES, render_format


def doc_dir(out: Path, name: str) -> Path:
    return out / name


def json_path(out: Path, name: str) -> Path:
    base = name.rsplit("/", 1)[-1]
    return out / name / f"{base}.json"


def staging_dir(out: Path, name: str, run_id: str) -> Path:
    d = out / name
    return d.parent / f".{d.name}.partial-{run_id}-{os.getpid()}"


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def load_output(out: Path, name: str) -> dict | None:
    """The JSON of the document already written under this name, if any (read once per document)."""
    p = json_path(out, name)
    if not p.is_file():
        return None
    try:
        return json.loads(p.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


@dataclass(frozen=True)
class Existing:
    """What a finished output already under a name says about itself: enough to decide whether a
    document is done (is_complete) and whose name it is (choose_name), for any scheduler."""

    sha256: str | None
    path: str | None
    pages: frozenset[int]
    ok: bool                 # no page failed
    page_count: int = 0      # the source's
    formats: frozenset[str] = frozenset()  # the output files that are there (md, html, json, pdf, chunks)

    @classmethod
    def from_json(cls, data: Any) -> "Existing | None":
        if not isinstance(data, dict):
            return None
        pages = [pg for pg in data.get("pages", []) if isinstance(pg, dict)]
        src = data.get("source") or {}
        return cls(sha256=src.get("sha256"), path=src.get("path"),
                   pages=frozenset(pg.get("index") for pg in pages if isinstance(pg.get("index"), int)),
                   ok=all(pg.get("status") != "failed" for pg in pages),
                   page_count=src.get("page_count") if isinstance(src.get("page_count"), int) else 0)


def load_existing(out: Path, name: str) -> Existing | None:
    found = Existing.from_json(load_output(out, name))
    if found is None:
        return None
    base = name.rsplit("/", 1)[-1]
    return replace(found, formats=frozenset(f for f, suffix in SUFFIXES.items() if (out / name / f"{base}{suffix}").is_file()))


def is_complete(existing: Existing | None, sha256: str | None, indices: list[int] | None = None,
                formats: tuple[str, ...] | None = None) -> bool:
    """True when a finished output for this exact source, holding every wanted page and every wanted
    format (a run asking for a format the earlier one did not write redoes the document), is there."""
    if existing is None:
        return False
    if formats and not set(formats) <= existing.formats:
        return False
    if sha256 and existing.sha256 != sha256:
        return False
    if indices is not None and not set(indices) <= existing.pages:
        return False  # converted with another page selection
    return existing.ok


def alt_name(src: SourceFile) -> str:
    """The name a document gets when its own name already holds another file's output."""
    return f"{src.name}-{path_hash(src.path)}"


def choose_name(src: SourceFile, sha256: str, here: Existing | None,
                alt: Callable[[], Existing | None]) -> tuple[SourceFile, Existing | None]:
    """(the document's output name, what is already written under it). A document already in OUT
    under this name from another file keeps its output: this one gets a short hash of its path (a
    later run never overwrites an unrelated document). `alt()` reads what is under that other name."""
    if here is None or here.sha256 in (None, sha256):
        return src, here
    if same_file(here.path, src.path):
        return src, here  # the same file, changed: converted again under its name
    return SourceFile(path=src.path, name=alt_name(src)), alt()


def write_document(
    doc: Document, out: Path, name: str, staging: Path | None = None, *, keep_headers_footers: bool = False,
    formats: tuple[str, ...] = DEFAULT_FORMATS, password: str | None = None, paginate: bool = False,
) -> Path:
    """Write the document's files into staging (holding its figure crops) and swap it into place.
    formats: any of md, html, json, pdf, chunks (json is always written: it marks the document
    complete); pdf is built from the source (doc.source.path; `password` for an encrypted PDF)."""
    from ocrserve.export.searchable_pdf import SearchablePdfError

    base = name.rsplit("/", 1)[-1]
    final = out / name
    final.parent.mkdir(parents=True, exist_ok=True)
    staging = staging or staging_dir(out, name, uuid.uuid4().hex[:8])
    staging.mkdir(parents=True, exist_ok=True)
    if "md" in formats:
        (staging / f"{base}.md").write_text(render_markdown(doc, keep_headers_footers=keep_headers_footers,
                                                                    paginate=paginate), encoding="utf-8")
    if "html" in formats:
        (staging / f"{base}.html").write_text(render_html(doc, title=base), encoding="utf-8")
    if "pdf" in formats:
        try:
            data, _ = render_format(doc, "pdf", password=password)
        except SearchablePdfError as e:
            raise OSError(f"searchable PDF: {e}") from None
        (staging / f"{base}.pdf").write_bytes(data)
    if "chunks" in formats:
        data, _ = render_format(doc, "chunks", keep_headers_footers=keep_headers_footers)
        (staging / f"{base}.chunks.jsonl").write_bytes(data)
    # the JSON goes last: its presence marks the document complete
    tmp = staging / f".{base}.json.tmp"
    tmp.write_text(render_json(doc), encoding="utf-8")
    os.replace(tmp, staging / f"{base}.json")
    if final.exists():
        trash = final.parent / f".{final.name}.old-{uuid.uuid4().hex[:8]}"
        os.replace(final, trash)
        os.replace(staging, final)
        shutil.rmtree(trash, ignore_errors=True)
    else:
        os.replace(staging, final)
    return final


def clean_stale_staging(out: Path) -> None:
    """Remove staging folders left by an interrupted run (never those of a run still going)."""
    if not out.is_dir():
        return
    for p in out.rglob(".*.partial-*"):
        pid = p.name.rsplit("-", 1)[-1]
        if p.is_dir() and not (pid.isdigit() and _pid_alive(int(pid))):
            shutil.rmtree(p, ignore_errors=True)
    for p in out.rglob(".*.old-*"):
        if p.is_dir():
            shutil.rmtree(p, ignore_errors=True)


@dataclass(frozen=True)
class Plan:
    """What a run does with an opened document: its output name, the pages it converts, or why it
    converts nothing (status skipped: complete output already there; failed: no page selected)."""

    src: SourceFile
    indices: list[int]
    status: str | None = None
    error: str | None = None


def plan_document(src: SourceFile, sha256: str, page_count: int, indices: list[int], *, writes: bool,
                  force: bool, here: Existing | None, alt: Callable[[], Existing | None],
                  formats: tuple[str, ...] = DEFAULT_FORMATS) -> Plan:
    """The one rule, for every scheduler: name the output (choose_name), then convert the selected
    pages unless the output under that name is complete for this source and selection."""
    existing = None
    if writes:
        src, existing = choose_name(src, sha256, here, alt)
    if not indices:
        return Plan(src, indices, "failed", f"no pages selected (the document has {page_count})")
    if writes and not force and is_complete(existing, sha256, indices, formats):
        return Plan(src, indices, "skipped")
    return Plan(src, indices)


def done_though_unreadable(error: BaseException, here: Existing | None, selection: list[int] | None,
                           formats: tuple[str, ...] = DEFAULT_FORMATS) -> bool:
    """A document that cannot be opened now (an encrypted PDF rerun without its password) whose
    complete output from this very file (same hash) is already there counts as finished: skipped."""
    from ocrserve.pipeline.page import page_indices

    sha = getattr(error, "sha256", None)
    if not sha or here is None or here.sha256 != sha:
        return False
    return is_complete(here, sha, page_indices(selection, here.page_count), formats)
