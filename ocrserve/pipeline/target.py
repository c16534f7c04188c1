"""Where a run writes: a local folder (atomic, via output.write_document) or, with Ray, any fsspec URL.

Both schedulers write through this. In a Ray run the driver is the only writer. A local folder gets
the staging folder swapped into place. A remote target (s3://, gs://, file://, memory://, ...) gets the same
files uploaded into OUT/<name>/ with the JSON last, after any older output of the document was
removed, so the JSON's presence keeps meaning "complete" there too. Completeness is the one rule
(output.is_complete) over what load_existing() reads.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import tempfile
import uuid
from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from ocrserve.document import Document, Page
from ocrserve.errors import OcrserveError
from ocrserve.export.formats import DEFAULT_FORMATS, RenderContext, get_format, output_formats
from ocrserve.ingest.naming import Occupant
from ocrserve.pipeline.output import (
    Existing,
    add_formats,
    clean_stale_staging,
    json_path,
    kept_pages,
    load_existing,
    load_output,
    staging_dir,
    unwritable,
    write_document,
)
from ocrserve.pipeline.results import DocResult, DocStatus

if TYPE_CHECKING:
    from fsspec import AbstractFileSystem

log = logging.getLogger(__name__)


_COLLAPSED = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]+):/(?!/)(.*)$")


def normalize_target(target: str | Path) -> str:
    """The output as a string; `s3:/bucket/x` (a URL that went through pathlib.Path) -> `s3://bucket/x`."""
    s = str(target)
    m = _COLLAPSED.match(s)
    if m and "://" not in s:
        scheme, rest = m.groups()
        s = f"file:///{rest}" if scheme == "file" else f"{scheme}://{rest}"
    return s


def is_url(target: str | Path) -> bool:
    return "://" in normalize_target(target)


class OutputError(OcrserveError, ValueError):
    """The output folder cannot be made or written (a file is there, no permission, no such parent)."""


class OutputTarget:
    """A local folder or an fsspec URL, written by the driver."""

    def __init__(self, target: str | Path, storage_options: dict | None = None) -> None:
        self.target = normalize_target(target)
        self.storage_options = storage_options or {}
        self._fs: AbstractFileSystem | None = None  # a remote target's
        if self.target.startswith("file://"):  # a local folder, written atomically like any other
            self.target = self.target[len("file://") :]
        if is_url(self.target):
            import fsspec

            self._fs, root = fsspec.core.url_to_fs(self.target, **self.storage_options)
            self.root = root.rstrip("/")
            self.local: Path | None = None
        else:
            self.local = Path(self.target)
            self.root = str(self.local)
        self._known: dict[str, Existing | None] | None = None  # load_existing's answers within one run

    def __str__(self) -> str:
        return self.target

    @property
    def _remote(self) -> AbstractFileSystem:
        """The filesystem of a remote target (the local one is written with pathlib)."""
        if self._fs is None:
            raise RuntimeError(f"{self.target} is a local folder, not an fsspec URL")
        return self._fs

    # -- paths -------------------------------------------------------------------------------
    def _json_path(self, name: str) -> str:
        base = name.rsplit("/", 1)[-1]
        return f"{self.root}/{name}/{base}.json"

    def location(self, name: str) -> str:
        if self.local is not None:
            return str(self.local / name)
        return f"{self.target.rstrip('/')}/{name}"

    # -- before a run ------------------------------------------------------------------------
    def prepare(self) -> None:
        """Make the output folder; one that cannot be made is an OutputError naming it and why."""
        try:
            if self.local is not None:
                if self.local.exists() and not self.local.is_dir():
                    raise OutputError(f"output {self.target}: a file is there, not a folder")
                self.local.mkdir(parents=True, exist_ok=True)
                clean_stale_staging(self.local)
                if why := unwritable(self.local):  # a read-only folder: one line, before any document
                    raise OutputError(f"output {self.target}: {why}")
            else:
                self._remote.makedirs(self.root, exist_ok=True)
        except OSError as e:
            why = e.strerror or str(e)
            raise OutputError(f"output {self.target}: cannot create the folder ({why})") from None

    def begin_run(self) -> None:
        """From now until the next run, each name's output is read once (naming, then planning, ask
        again); a document this target writes is read afresh."""
        self._known = {}

    def load_existing(self, name: str) -> Existing | None:
        """What a finished output already under this name says (output.Existing), or None."""
        if self._known is None:
            return self._load_existing(name)
        if name not in self._known:
            self._known[name] = self._load_existing(name)
        return self._known[name]

    def _load_existing(self, name: str) -> Existing | None:
        if self.local is not None:
            return load_existing(self.local, name)
        try:
            path = self._json_path(name)
            if not self._remote.isfile(path):
                return None
            with self._remote.open(path, "rb") as f:
                found = Existing.from_json(json.loads(f.read().decode("utf-8")))
            if found is None:
                return None
            base = name.rsplit("/", 1)[-1]
            return replace(
                found,
                formats=frozenset(
                    f.name for f in output_formats() if self._remote.isfile(f"{self.root}/{name}/{base}{f.suffix}")
                ),
            )
        except (OSError, ValueError):
            return None

    def forget(self, *names: str) -> None:
        """These names' outputs are planned: not asked again this run (a long run keeps no answer)."""
        for name in names:
            if self._known is not None:
                self._known.pop(name, None)

    def occupant(self, name: str) -> Occupant | None:
        """What is under OUT/<name> (ingest/naming.py's rule): a document, with its source's path; a
        folder that is no document (it holds others); or nothing."""
        if self.local is not None:
            if (self.local / name / f"{name.rsplit('/', 1)[-1]}.json").is_file():
                found = self.load_existing(name)
                return Occupant(document=True, path=found.path if found else None)
            return Occupant(document=False) if (self.local / name).is_dir() else None
        try:
            if self._remote.isfile(self._json_path(name)):
                found = self.load_existing(name)
                return Occupant(document=True, path=found.path if found else None)
            return Occupant(document=False) if self._remote.isdir(f"{self.root}/{name}") else None
        except OSError:
            return None

    # -- writing -----------------------------------------------------------------------------
    def staging(self, name: str, run_id: str) -> Path | None:
        """A local target's staging folder for a document (figure crops go there as pages finish)."""
        return staging_dir(self.local, name, run_id) if self.local is not None else None

    def write(
        self,
        doc: Document,
        name: str,
        files: dict[str, bytes],
        run_id: str,
        *,
        formats: tuple[str, ...] = DEFAULT_FORMATS,
        ctx: RenderContext | None = None,
    ) -> str:
        """Write the document's files in `formats`, rendered with `ctx` (output.write_document), and its
        figure crops (relative path -> bytes; a local run's crops are already in its staging folder);
        returns where."""
        if self._known is not None:
            self._known.pop(name, None)
        if self.local is not None:
            staging = staging_dir(self.local, name, run_id)
            try:
                _put_files(staging, files)
                return str(write_document(doc, self.local, name, staging, formats=formats, ctx=ctx))
            except BaseException:
                shutil.rmtree(staging, ignore_errors=True)
                raise
        with tempfile.TemporaryDirectory(prefix="ocrserve-ray-") as tmp:
            out = Path(tmp)
            staging = staging_dir(out, name, uuid.uuid4().hex[:8])
            _put_files(staging, files)
            folder = write_document(doc, out, name, staging, formats=formats, ctx=ctx)
            self._upload(folder, name)
        return self.location(name)

    def add_formats(self, name: str, formats: tuple[str, ...], ctx: RenderContext | None = None) -> str:
        """Render the formats a finished document lacks from its JSON (output.add_formats); its other
        files stay. Returns where the document is."""
        if self._known is not None:
            self._known.pop(name, None)
        if self.local is not None:
            return str(add_formats(self.local, name, formats, ctx))
        fs, base = self._remote, name.rsplit("/", 1)[-1]
        with tempfile.TemporaryDirectory(prefix="ocrserve-formats-") as tmp:
            here = Path(tmp) / name
            here.mkdir(parents=True)
            fs.get(self._json_path(name), str(here / f"{base}.json"))
            add_formats(Path(tmp), name, formats, ctx)
            for f in formats:
                suffix = get_format(f).suffix
                with fs.open(f"{self.root}/{name}/{base}{suffix}", "wb") as out:
                    out.write((here / f"{base}{suffix}").read_bytes())
        return self.location(name)

    def kept_pages(
        self, name: str, indices: Iterable[int], into: Path | None = None, *, strict: bool = True
    ) -> tuple[dict[int, Page], dict[str, bytes]]:
        """The pages `indices` of the finished output under `name` as they are (a rerun with the model
        that wrote them keeps them: output.plan_document's `keep`), and their figure crops: linked or
        copied into `into` (a local run's staging folder), else returned (path relative to the document
        folder -> bytes: the Ray driver writes them with the document). A crop that is not there is
        left out (logged); an output that cannot be read is an OSError, or with `strict` False no page
        (logged: they are all converted again)."""
        try:
            return self._kept_pages(name, indices, into)
        except OSError as e:
            if strict:
                raise
            log.warning("%s: every page converted again (%s)", name, e)
            return {}, {}

    def _kept_pages(
        self, name: str, indices: Iterable[int], into: Path | None
    ) -> tuple[dict[int, Page], dict[str, bytes]]:
        files: dict[str, bytes] = {}
        if self.local is not None:
            where = json_path(self.local, name)
            pages, figures = kept_pages(load_output(self.local, name), where, indices)
            for rel in figures:
                src = self.local / name / rel
                if not src.is_file():
                    log.warning("%s: figure %s is not there", where, rel)
                elif into is None:
                    files[rel] = src.read_bytes()
                else:
                    (into / rel).parent.mkdir(parents=True, exist_ok=True)
                    try:
                        os.link(src, into / rel)  # the old folder goes once the new one is in place
                    except OSError:
                        shutil.copyfile(src, into / rel)
            return pages, files
        fs, url = self._remote, self._json_path(name)
        try:
            data = json.loads(fs.cat_file(url))
        except (OSError, ValueError) as e:
            raise OSError(f"{url}: {e}") from None
        pages, figures = kept_pages(data, url, indices)
        for rel in figures:
            try:
                files[rel] = fs.cat_file(f"{self.root}/{name}/{rel}")
            except FileNotFoundError:
                log.warning("%s: figure %s is not there", url, rel)
        if into is not None:
            _put_files(into, files)
            files = {}
        return pages, files

    def _upload(self, folder: Path, name: str) -> None:
        fs = self._remote
        dest = f"{self.root}/{name}"
        base = name.rsplit("/", 1)[-1]
        if fs.exists(dest):
            # the old JSON first: an interrupted overwrite must not look complete
            old_json = f"{dest}/{base}.json"
            if fs.exists(old_json):
                fs.rm(old_json)
            fs.rm(dest, recursive=True)
        fs.makedirs(dest, exist_ok=True)
        files = sorted(p for p in folder.rglob("*") if p.is_file())
        last = folder / f"{base}.json"
        for p in [p for p in files if p != last] + [last]:
            rel = p.relative_to(folder).as_posix()
            parent = f"{dest}/{rel}".rsplit("/", 1)[0]
            if parent != dest:
                fs.makedirs(parent, exist_ok=True)
            with fs.open(f"{dest}/{rel}", "wb") as f:
                f.write(p.read_bytes())


def formats_added(
    target: OutputTarget, name: str, path: str, formats: tuple[str, ...], ctx: RenderContext
) -> DocResult:
    """A document whose pages are done but that lacks formats (plan status updated): they are rendered
    from its JSON, nothing is converted again (both schedulers); one that cannot be written fails."""
    r = DocResult(name=name, path=path, status=DocStatus.UPDATED, redo=f"added {', '.join(formats)} from its JSON")
    try:
        out = target.add_formats(name, formats, replace(ctx, source=path))
        r.output = Path(out) if target.local is not None else None
    except (OSError, ValueError) as e:
        r.status, r.error = DocStatus.FAILED, f"cannot write output: {e}"
    return r


def _put_files(staging: Path, files: dict[str, bytes]) -> None:
    staging.mkdir(parents=True, exist_ok=True)
    for rel, data in files.items():
        p = (staging / rel).resolve()
        if staging.resolve() not in p.parents:
            raise ValueError(f"figure path {rel!r} leaves the document folder")
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)
