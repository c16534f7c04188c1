"""Per-document output: OUT/<name>/<basename><suffix> for each format asked for (by default .md,
.html, .json; export/formats.py's registry says which formats there are and their files) + images/,
written atomically.

Pages' figure crops go to a hidden staging folder as pages finish; when the last page is back the
formats' files are written there (the JSON last) and the folder is swapped into place with a rename, so
an interrupted run never leaves a half-written document that looks complete. A document's pages
count as done when its JSON is there, its source hash matches, it holds every wanted page, no page
failed, and (for a run with a model) no page came from the fallback (pages_done); it is complete when
every asked format's file is there too (is_complete). A document whose pages are done but that lacks
a format gets it rendered from its JSON, without OCR (add_formats); a document converted again keeps
every format it had, and a run with the model that wrote it converts again only its pages that came
from the fallback or failed, keeping the model's pages and their crops (plan_document: the one rule, for
the local and the Ray scheduler alike; kept_pages reads what is kept).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any

from ocrserve.document import Document, Page
from ocrserve.export.formats import DEFAULT_FORMATS, RenderContext, get_format, output_formats
from ocrserve.ingest.naming import path_hash, same_file
from ocrserve.ingest.sources import PageSelection, SourceFile

if TYPE_CHECKING:
    from ocrserve.pipeline.options import ConvertOptions


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
    ok: bool  # no page failed
    page_count: int = 0  # the source's
    formats: frozenset[str] = frozenset()  # the formats whose files are there (md, html, json, ...)
    fallback: frozenset[int] = frozenset()  # pages the fallback wrote (the model had failed them)
    failed: frozenset[int] = frozenset()  # pages that failed
    model: str | None = None  # what read its pages (Document.model: a model profile's name, or lite)

    @classmethod
    def from_json(cls, data: Any) -> Existing | None:
        if not isinstance(data, dict):
            return None
        pages = [pg for pg in data.get("pages", []) if isinstance(pg, dict)]
        src = data.get("source") or {}
        page_count = src.get("page_count")
        model = data.get("model")

        def having(status: str) -> frozenset[int]:
            return frozenset(
                pg["index"] for pg in pages if isinstance(pg.get("index"), int) and pg.get("status") == status
            )

        return cls(
            sha256=src.get("sha256"),
            path=src.get("path"),
            pages=frozenset(pg["index"] for pg in pages if isinstance(pg.get("index"), int)),
            ok=all(pg.get("status") != "failed" for pg in pages),
            page_count=page_count if isinstance(page_count, int) else 0,
            fallback=having("fallback"),
            failed=having("failed"),
            model=model if isinstance(model, str) else None,
        )


def load_existing(out: Path, name: str) -> Existing | None:
    found = Existing.from_json(load_output(out, name))
    if found is None:
        return None
    base = name.rsplit("/", 1)[-1]
    here = out / name
    return replace(found, formats=frozenset(f.name for f in output_formats() if (here / f"{base}{f.suffix}").is_file()))


def pages_done(
    existing: Existing | None, sha256: str | None, indices: list[int] | None = None, redo_fallback: bool = False
) -> bool:
    """True when a finished output for this exact source holds every wanted page, none failed, and,
    with `redo_fallback` (a run whose engine is a model), none came from the fallback: a page the
    fallback wrote while the model was down is converted again by the next run with the model."""
    if existing is None:
        return False
    if sha256 and existing.sha256 != sha256:
        return False
    if indices is not None and not set(indices) <= existing.pages:
        return False  # converted with another page selection
    if redo_fallback and existing.fallback & (set(indices) if indices is not None else existing.pages):
        return False
    return existing.ok


def is_complete(
    existing: Existing | None,
    sha256: str | None,
    indices: list[int] | None = None,
    formats: tuple[str, ...] | None = None,
    redo_fallback: bool = False,
) -> bool:
    """pages_done, and every wanted format's file is there."""
    if existing is None or (formats and not set(formats) <= existing.formats):
        return False
    return pages_done(existing, sha256, indices, redo_fallback)


def alt_name(src: SourceFile) -> str:
    """The name a document gets when its own name already holds another file's output."""
    return f"{src.name}-{path_hash(src.path)}"


def choose_name(
    src: SourceFile, sha256: str, here: Existing | None, alt: Callable[[], Existing | None]
) -> tuple[SourceFile, Existing | None]:
    """(the document's output name, what is already written under it). A document already in OUT
    under this name from another file keeps its output: this one gets a short hash of its path (a
    later run never overwrites an unrelated document). `alt()` reads what is under that other name."""
    if here is None or here.sha256 in (None, sha256):
        return src, here
    if same_file(here.path, src.path):
        return src, here  # the same file, changed: converted again under its name
    return SourceFile(path=src.path, name=alt_name(src)), alt()


def render_context(options: ConvertOptions) -> RenderContext:
    """What a conversion's options say about rendering its files (both schedulers' writers use this)."""
    return RenderContext(
        keep_headers_footers=bool(options.keep_headers_footers),
        paginate=options.paginate,
        images=options.figures,
        password=options.password,
    )


def write_document(
    doc: Document,
    out: Path,
    name: str,
    staging: Path | None = None,
    *,
    formats: tuple[str, ...] = DEFAULT_FORMATS,
    ctx: RenderContext | None = None,
) -> Path:
    """Write the document's files into staging (holding its figure crops) and swap it into place.
    formats: registered format names (export/formats.py); an always-written one (json) is written
    whether asked or not, and last: its file marks the document complete. ctx: the render options
    (keep_headers_footers, paginate, images, password of the source, ...); the HTML's title is the
    document's name unless ctx gives one. A renderer's ValueError (a searchable PDF whose source is
    gone) is an OSError naming the format: the document's output cannot be written."""
    base = name.rsplit("/", 1)[-1]
    ctx = ctx or RenderContext()
    if ctx.title is None:
        ctx = replace(ctx, title=base)
    chosen = [get_format(f) for f in formats]
    chosen = [f for f in chosen if not f.always] + [f for f in output_formats() if f.always]
    final = out / name
    final.parent.mkdir(parents=True, exist_ok=True)
    staging = staging or staging_dir(out, name, uuid.uuid4().hex[:8])
    staging.mkdir(parents=True, exist_ok=True)
    _write_formats(doc, staging, base, [f.name for f in chosen], ctx)  # the always-written files last
    if final.exists():
        trash = final.parent / f".{final.name}.old-{uuid.uuid4().hex[:8]}"
        os.replace(final, trash)
        os.replace(staging, final)
        shutil.rmtree(trash, ignore_errors=True)
    else:
        os.replace(staging, final)
    return final


def _write_formats(doc: Document, folder: Path, base: str, formats: list[str], ctx: RenderContext) -> None:
    """Each format's file in the folder, complete or absent (written beside it, then renamed)."""
    for fmt in (get_format(f) for f in formats):
        try:
            data = fmt.to_bytes(doc, ctx)
        except ValueError as e:
            raise OSError(f"{fmt.title or fmt.name}: {e}") from None
        tmp = folder / f".{base}{fmt.suffix}.tmp"
        try:
            tmp.write_bytes(data)
            os.replace(tmp, folder / f"{base}{fmt.suffix}")
        finally:
            tmp.unlink(missing_ok=True)


def add_formats(out: Path, name: str, formats: tuple[str, ...], ctx: RenderContext | None = None) -> Path:
    """Render formats a finished document lacks from its JSON (the Document: no page is converted
    again) into its folder; its other files stay. An output that cannot be read or rendered is an
    OSError (the document then fails with the reason; --force converts it again)."""
    base = name.rsplit("/", 1)[-1]
    doc = read_document(load_output(out, name), json_path(out, name))
    ctx = ctx or RenderContext()
    _write_formats(doc, out / name, base, list(formats), ctx if ctx.title else replace(ctx, title=base))
    return out / name


def read_document(data: Any, where: object) -> Document:
    """An output's JSON as the Document; one this version cannot read is an OSError naming `where`."""
    try:
        return Document.model_validate(data)
    except ValueError as e:
        raise OSError(f"{where}: not a Document this version reads ({e.__class__.__name__})") from None


def kept_pages(data: Any, where: object, indices: Iterable[int]) -> tuple[dict[int, Page], list[str]]:
    """The pages `indices` of an output's JSON, as a rerun keeps them (plan_document's `keep`), and their
    figure crops' paths (relative to the document folder). An output that cannot be read, or lacks one of
    the pages, is an OSError naming `where`."""
    want = set(indices)
    pages = {p.index: p for p in read_document(data, where).pages if p.index in want}
    if set(pages) != want:
        raise OSError(f"{where}: pages {sorted(i + 1 for i in want - set(pages))} are not there")
    figures = [b.figure for p in pages.values() for b in p.blocks if b.figure]
    bad = [f for f in figures if PurePosixPath(f).is_absolute() or ".." in PurePosixPath(f).parts]
    if bad:
        raise OSError(f"{where}: a figure path leaves the document folder ({bad[0]})")
    return pages, figures


def unwritable(out: Path) -> str | None:
    """Why nothing can be written in the folder `out` (read-only, no permission, full), or None: a
    folder is made there and removed, as each document's staging folder will be."""
    try:
        probe = tempfile.mkdtemp(prefix=".ocrserve-probe-", dir=out)
    except OSError as e:
        return f"cannot write in the folder ({e.strerror or e})"
    with contextlib.suppress(OSError):
        os.rmdir(probe)
    return None


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
    """What a run does with an opened document: its output name, the pages it converts and the formats
    it writes (those asked, and those the output already had), or why it converts nothing (status
    skipped: complete output already there; updated: its pages are done, `formats` are missing and
    rendered from its JSON; failed: no page selected). `redo` says why done pages are converted again.
    `keep`: pages of `indices` taken as they are from the output already there (this run's model wrote
    them), with their figure crops; the others are converted."""

    src: SourceFile
    indices: list[int]
    status: str | None = None
    error: str | None = None
    formats: tuple[str, ...] = DEFAULT_FORMATS
    redo: str | None = None
    keep: frozenset[int] = frozenset()


def plan_document(
    src: SourceFile,
    sha256: str,
    page_count: int,
    indices: list[int],
    *,
    writes: bool,
    force: bool,
    here: Existing | None,
    alt: Callable[[], Existing | None],
    formats: tuple[str, ...] = DEFAULT_FORMATS,
    redo_fallback: bool = False,
    model: str | None = None,
) -> Plan:
    """The one rule, for every scheduler: name the output (choose_name), then convert the selected
    pages unless the output under that name is done for this source and selection (pages_done; with
    `redo_fallback`, a run with a model, pages the fallback wrote are not done): then it is skipped,
    or the formats it lacks are rendered from its JSON. A document converted again keeps its formats;
    when the output there is of this source and selection and `model` (this run's) wrote it, only its
    pages that came from the fallback or failed are converted again, its model pages are kept."""
    existing = None
    if writes:
        src, existing = choose_name(src, sha256, here, alt)
    if not indices:
        return Plan(src, indices, "failed", f"no pages selected (the document has {page_count})", formats)
    if existing is None:
        return Plan(src, indices, formats=formats)
    if not force and pages_done(existing, sha256, indices, redo_fallback):
        missing = tuple(f for f in formats if f not in existing.formats)
        return Plan(src, indices, "updated", formats=missing) if missing else Plan(src, indices, "skipped")
    kept = tuple(f.name for f in output_formats() if f.name in formats or f.name in existing.formats)
    if force:
        return Plan(src, indices, formats=kept)
    wanted, same = set(indices), existing.sha256 == sha256
    again = existing.fallback & wanted if redo_fallback and same else set()
    failed = existing.failed & wanted
    ours = redo_fallback and model is not None and existing.model == model  # its model pages are this run's
    if not (ours and same and wanted <= existing.pages and (again or failed)):
        redo = f"{len(again)} of {len(indices)} pages came from the fallback: converted again" if again else None
        return Plan(src, indices, formats=kept, redo=redo)
    why = [f"{len(again)} of {len(indices)} pages came from the fallback"] if again else []
    why += [f"{len(failed)} failed" if again else f"{len(failed)} of {len(indices)} pages failed"] if failed else []
    redo = f"{', '.join(why)}: only those converted again"
    return Plan(src, indices, formats=kept, redo=redo, keep=frozenset(wanted - again - failed))


def done_though_unreadable(
    error: BaseException,
    here: Existing | None,
    selection: PageSelection | None,
    formats: tuple[str, ...] = DEFAULT_FORMATS,
) -> bool:
    """A document that cannot be opened now (an encrypted PDF rerun without its password) whose
    complete output from this very file (same hash) is already there counts as finished: skipped."""
    from ocrserve.pipeline.page import page_indices

    sha = getattr(error, "sha256", None)
    if not sha or here is None or here.sha256 != sha:
        return False
    return is_complete(here, sha, page_indices(selection, here.page_count), formats)
