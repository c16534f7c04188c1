"""Inputs (files, folders, globs, `-` for a list on stdin) -> the documents of a run, each with a unique name."""

from __future__ import annotations

import bisect
import errno
import glob
import logging
import os
import re
import stat
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from ocrserve.errors import OcrserveError
from ocrserve.ingest.naming import OccupantOf, assign_names
from ocrserve.ingest.sniff import DOC_EXTENSIONS, sniff_file

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SourceFile:
    path: Path  # the file
    name: str  # output name: OUT/<name>/<basename>.{md,html,json}; may contain folders

    @property
    def basename(self) -> str:
        return self.name.rsplit("/", 1)[-1]


class InputError(OcrserveError, ValueError):
    """An input argument that names nothing (missing path, empty glob)."""


def _is_glob(s: str) -> bool:
    return any(c in s for c in "*?[")


@dataclass(frozen=True)
class InputProblem:
    """Something an input holds that cannot be read as a document: named, with the reason, so the
    run reports it as failed instead of leaving it out without a word."""

    path: Path
    reason: str
    name: str = ""  # the output name it would have had (for the run's order and events)
    status: str = "failed"  # or "unsupported": a file in a folder that is no document ocrserve reads


def _os_reason(e: OSError) -> str:
    return e.strerror or str(e)


def _folder_entries(root: Path, skip: frozenset[tuple[int, int]] = frozenset()) -> list[Path | InputProblem]:
    """Documents under a folder (recursive, hidden entries left out) and what could not be read there;
    the folders in `skip` (their (device, inode): the run's output folder) are not walked.

    Symlinks are followed: one to a folder is walked, unless it leads back into a folder being walked
    (a loop) or to one walked already; a dangling symlink, a loop and a folder or extensionless file
    that cannot be read are each an InputProblem.
    """
    out: list[Path | InputProblem] = []
    seen_dirs: set[tuple[int, int]] = set()

    def walk(folder: Path, ancestors: tuple[tuple[int, int], ...]) -> None:
        try:
            with os.scandir(folder) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError as e:
            out.append(InputProblem(folder, f"cannot read folder: {_os_reason(e)}"))
            return
        for entry in entries:
            if entry.name.startswith("."):
                continue
            p = folder / entry.name
            try:
                st = os.stat(p)  # follows symlinks
            except OSError as e:
                if entry.is_symlink():
                    target = _readlink(p)
                    if e.errno == errno.ELOOP:
                        out.append(InputProblem(p, f"symlink loop (-> {target})"))
                    elif isinstance(e, FileNotFoundError):
                        out.append(InputProblem(p, f"dangling symlink (-> {target}: no such file)"))
                    else:
                        out.append(InputProblem(p, f"symlink -> {target}: {_os_reason(e)}"))
                else:
                    out.append(InputProblem(p, f"cannot read: {_os_reason(e)}"))
                continue
            if stat.S_ISDIR(st.st_mode):
                key = (st.st_dev, st.st_ino)
                if key in skip:
                    continue  # the output folder inside an input folder: its files are not inputs
                if key in ancestors:
                    out.append(InputProblem(p, f"symlink loop (-> {_readlink(p)}, a folder that holds it)"))
                elif key not in seen_dirs:  # a folder reached twice is walked once
                    seen_dirs.add(key)
                    walk(p, ancestors + (key,))
            elif stat.S_ISREG(st.st_mode):
                if p.suffix.lower() in DOC_EXTENSIONS:
                    out.append(p)  # an unreadable one fails at open, with its reason
                elif not p.suffix:
                    try:
                        out.append(p if sniff_file(p) else InputProblem(p, _UNSUPPORTED.format("(none)"), status=_NOT))
                    except OSError as e:
                        out.append(InputProblem(p, f"cannot read: {_os_reason(e)}"))
                else:  # named, not converted: a run of only such files converts nothing, and says so
                    out.append(InputProblem(p, _UNSUPPORTED.format(p.suffix), status=_NOT))

    st = os.stat(root)
    seen_dirs.add((st.st_dev, st.st_ino))
    walk(root, ((st.st_dev, st.st_ino),))
    return out


_NOT = "unsupported"
_UNSUPPORTED = "unsupported file type {}: not PDF/PNG/JPEG/WebP/TIFF/BMP/GIF or an Office document"
_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")


def _not_a_url(s: str, p: Path) -> None:
    """A URL as an input is an InputError saying so (not 'no such file' for its collapsed path)."""
    if _URL.match(s) and not p.exists():
        raise InputError(f"{s}: URLs are not supported as input; download the file first, or send it to `ocrserve api`")


def _readlink(p: Path) -> str:
    try:
        return os.readlink(p)
    except OSError:
        return "?"


def expand_inputs(inputs: list[str | Path], stdin=None, occupant: OccupantOf | None = None) -> list[SourceFile]:
    """The documents of expand_sources(); what could not be read is logged and left out."""
    out = []
    for item in expand_sources(inputs, stdin, occupant):
        if isinstance(item, InputProblem):
            log.warning("%s: %s", item.path, item.reason)
        else:
            out.append(item)
    return out


def expand_sources(
    inputs: list[str | Path], stdin=None, occupant: OccupantOf | None = None, exclude: Path | None = None
) -> list[SourceFile | InputProblem]:
    """Expand inputs into documents with unique, stable output names, in input order, and the
    things found that cannot be read (InputProblem: path and reason), where they were found.

    Files in folders keep their path relative to the folder (a/x.pdf -> a/x); a name another
    document holds (in the output folder, `occupant`, or in the run) gets a short hash of the file's
    absolute path, so no two inputs share an output and a file's name does not depend on what else
    the run converts (ingest/naming.py has the rule). `exclude` (the output folder) is never walked
    into when it lies inside an input folder: a rerun does not read its own outputs back as inputs.
    """
    skip: frozenset[tuple[int, int]] = frozenset()
    if exclude is not None:
        try:
            st = os.stat(exclude)
            skip = frozenset({(st.st_dev, st.st_ino)})
        except OSError:  # not made yet: nothing in it to skip
            pass
    items: list[tuple[Path, str] | InputProblem] = []  # (file, name stem with relative folder) or a problem
    for raw in inputs:
        s = str(raw)
        if s == "-":
            stream = stdin or sys.stdin
            lines = [ln.strip() for ln in stream.read().splitlines() if ln.strip()]
            for ln in lines:
                _not_a_url(ln, Path(ln))
            items.extend((Path(ln), Path(ln).stem) for ln in lines)
            continue
        p = Path(s).expanduser()
        _not_a_url(s, p)
        if p.is_dir():
            entries = _folder_entries(p, skip)
            if not entries:
                log.warning("folder %s holds no documents", p)
            for f in entries:
                rel = (f.path if isinstance(f, InputProblem) else f).relative_to(p)
                stem = (rel.parent / rel.stem).as_posix() if rel.parent != Path(".") else rel.stem
                if isinstance(f, InputProblem):
                    items.append(InputProblem(f.path, f.reason, _safe_name(rel.as_posix()), f.status))
                else:
                    items.append((f, stem))
        elif p.exists():
            items.append((p, p.stem))
        elif _is_glob(s):
            matches = sorted(glob.glob(s, recursive=True))
            if not matches:
                raise InputError(f"{s}: the pattern matches no file")
            for m in matches:
                mp = Path(m)
                if mp.is_file():
                    items.append((mp, mp.stem))
                elif mp.is_symlink() and not mp.exists():
                    items.append(InputProblem(mp, f"dangling symlink (-> {_readlink(mp)})", _safe_name(mp.name)))
        else:
            # a listed file that does not exist still gets its entry so it fails alone, named
            items.append((p, p.stem))
    seen: dict[Path, None] = {}
    unique: list[tuple[Path, str] | InputProblem] = []
    for item in items:
        if isinstance(item, InputProblem):
            unique.append(item)
            continue
        f, stem = item
        key = f.resolve() if f.exists() else f.absolute()
        if key in seen:
            continue
        seen[key] = None
        unique.append(item)
    pairs = [u for u in unique if not isinstance(u, InputProblem)]
    names = iter(assign_names([(f, _safe_name(stem), stem.replace("\\", "/")) for f, stem in pairs], occupant))
    return [item if isinstance(item, InputProblem) else SourceFile(path=item[0], name=next(names)) for item in unique]


def _safe_name(stem: str) -> str:
    parts = [p for p in stem.replace("\\", "/").split("/") if p not in ("", ".", "..")]
    clean = ["".join(c if c.isalnum() or c in "-_. " else "_" for c in p).strip() or "_" for p in parts]
    return "/".join(clean) or "document"


MAX_PAGE_NUMBER = 1_000_000  # a page number above this is a typo, not a document
MAX_PAGE_RANGES = 1_000  # ranges in one selection; more is not a page selection a person wrote


@dataclass(frozen=True)
class PageSelection:
    """Selected pages as sorted, merged, 0-based half-open ranges [start, stop).

    Small whatever it selects (`1-1000000` is one range): membership is a binary search and
    `indices(page_count)` lists only pages a document of `page_count` pages has.
    """

    ranges: tuple[tuple[int, int], ...]

    @classmethod
    def of(cls, pages: Iterable[int]) -> PageSelection:
        """From 0-based page indices (the Python API's list form)."""
        return cls(_merge((i, i + 1) for i in pages))

    def __contains__(self, index: object) -> bool:
        if not isinstance(index, int):
            return False
        k = bisect.bisect_right(self.ranges, (index, float("inf"))) - 1
        return k >= 0 and self.ranges[k][0] <= index < self.ranges[k][1]

    def indices(self, page_count: int) -> list[int]:
        """The selected 0-based pages of a document with `page_count` pages, in order."""
        return [i for a, b in self.ranges if a < page_count for i in range(a, min(b, page_count))]

    def count(self, page_count: int) -> int:
        return sum(max(0, min(b, page_count) - a) for a, b in self.ranges)


def _merge(ranges: Iterable[tuple[int, int]]) -> tuple[tuple[int, int], ...]:
    out: list[list[int]] = []
    for a, b in sorted(ranges):
        if a < 0:
            raise InputError(f"page index {a} is negative")
        if out and a <= out[-1][1]:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return tuple((a, b) for a, b in out)


_RANGE = re.compile(r"\s*([0-9]+)\s*(?:-\s*([0-9]+)\s*)?")


def parse_page_ranges(spec: str | PageSelection | Iterable[int] | None) -> PageSelection | None:
    """'1-5,9' -> PageSelection(((0, 5), (8, 9))) (0-based, sorted, merged). None/'' -> all pages.

    A PageSelection is returned as it is; an iterable of ints is taken as 0-based indices.
    At most MAX_PAGE_RANGES ranges and page numbers up to MAX_PAGE_NUMBER: the work is linear in the
    length of the text, never in the number of pages selected.
    """
    if spec is None or isinstance(spec, PageSelection):
        return spec
    if not isinstance(spec, str):
        return PageSelection.of(spec)
    if not spec.strip():
        return None
    shown = spec if len(spec) <= 80 else spec[:77] + "..."
    parts = spec.split(",", MAX_PAGE_RANGES)
    if len(parts) > MAX_PAGE_RANGES:
        raise InputError(f"--pages {shown!r}: more than {MAX_PAGE_RANGES:,} page ranges")
    ranges: list[tuple[int, int]] = []
    for part in parts:
        if not part.strip():
            continue
        m = _RANGE.fullmatch(part)
        if m is None or len(part) > 40:
            raise InputError(f"--pages {shown!r}: {part.strip()[:40]!r} is not a page number or range like 1-5")
        lo = int(m.group(1))
        hi = int(m.group(2)) if m.group(2) is not None else lo
        if lo < 1 or hi < lo:
            raise InputError(f"--pages {shown!r}: {part.strip()!r} is not a page number or range like 1-5")
        if hi > MAX_PAGE_NUMBER:
            raise InputError(
                f"--pages {shown!r}: {part.strip()!r}: page numbers above {MAX_PAGE_NUMBER:,} are not accepted"
            )
        ranges.append((lo - 1, hi))
    return PageSelection(_merge(ranges))
