"""Inputs (files, folders, globs, `-` for a list on stdin) -> the documents of a run, each with a unique name."""

from __future__ import annotations

import glob
import hashlib
import logging
import sys
from dataclasses import dataclass
from pathlib import Path

from ocrserve.ingest.sniff import DOC_EXTENSIONS, sniff_file

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SourceFile:
    path: Path          # the file
    name: str           # output name: OUT/<name>/<basename>.{md,html,json}; may contain folders

    @property
    def basename(self) -> str:
        return self.name.rsplit("/", 1)[-1]


class InputError(ValueError):
    """An input argument that names nothing (missing path, empty glob)."""


def _is_glob(s: str) -> bool:
    return any(c in s for c in "*?[")


def _folder_files(root: Path) -> list[Path]:
    out = []
    for p in sorted(root.rglob("*")):
        if not p.is_file() or any(part.startswith(".") for part in p.relative_to(root).parts):
            continue
        if p.suffix.lower() in DOC_EXTENSIONS:
            out.append(p)
        elif not p.suffix:
            try:
                if sniff_file(p):
                    out.append(p)
            except OSError:
                pass
    return out


def expand_inputs(inputs: list[str | Path], stdin=None) -> list[SourceFile]:
    """Expand inputs into documents with unique, stable output names.

    Files in folders keep their path relative to the folder (a/x.pdf -> a/x); names that still
    collide get a short hash of their absolute path appended, so no two inputs share an output.
    """
    pairs: list[tuple[Path, str]] = []  # (file, name stem with relative folder)
    for raw in inputs:
        s = str(raw)
        if s == "-":
            stream = stdin or sys.stdin
            lines = [ln.strip() for ln in stream.read().splitlines() if ln.strip()]
            pairs.extend((Path(ln), Path(ln).stem) for ln in lines)
            continue
        p = Path(s).expanduser()
        if p.is_dir():
            files = _folder_files(p)
            if not files:
                log.warning("folder %s holds no documents", p)
            for f in files:
                rel = f.relative_to(p)
                stem = (rel.parent / rel.stem).as_posix() if rel.parent != Path(".") else rel.stem
                pairs.append((f, stem))
        elif p.exists():
            pairs.append((p, p.stem))
        elif _is_glob(s):
            matches = sorted(glob.glob(s, recursive=True))
            if not matches:
                raise InputError(f"{s}: the pattern matches no file")
            for m in matches:
                mp = Path(m)
                if mp.is_file():
                    pairs.append((mp, mp.stem))
        else:
            # a listed file that does not exist still gets its entry so it fails alone, named
            pairs.append((p, p.stem))
    seen: dict[Path, None] = {}
    unique: list[tuple[Path, str]] = []
    for f, stem in pairs:
        key = f.resolve() if f.exists() else f.absolute()
        if key in seen:
            continue
        seen[key] = None
        unique.append((f, stem))
    # names that would share an output folder get a short hash of their path: the same cleaned,
    # case-folded name twice, or a name that is a folder of another (a.pdf beside a/b.pdf: OUT/a/
    # must not hold OUT/a/b/; x.pdf beside x/images.pdf: OUT/x/images/ is x's figures)
    names = [_safe_name(stem) for _, stem in unique]
    keys = [n.casefold() for n in names]
    counts: dict[str, int] = {}
    for k in keys:
        counts[k] = counts.get(k, 0) + 1
    parents = {"/".join(k.split("/")[:i]) for k in keys for i in range(1, k.count("/") + 1)}
    out = []
    for (f, _), name, k in zip(unique, names, keys):
        if counts[k] > 1 or k in parents:
            name = f"{name}-{path_hash(f)}"
        out.append(SourceFile(path=f, name=name))
    return out


def path_hash(f: Path) -> str:
    """Short, stable hash of a file's absolute path (disambiguates output names)."""
    return hashlib.sha1(str(f.resolve() if f.exists() else f.absolute()).encode()).hexdigest()[:8]


def _safe_name(stem: str) -> str:
    parts = [p for p in stem.replace("\\", "/").split("/") if p not in ("", ".", "..")]
    clean = ["".join(c if c.isalnum() or c in "-_. " else "_" for c in p).strip() or "_" for p in parts]
    return "/".join(clean) or "document"


MAX_PAGE_RANGE = 1_000_000  # a page range wider than this is a typo, not a document


def parse_page_ranges(spec: str | None) -> list[int] | None:
    """'1-5,9' -> [0,1,2,3,4,8] (0-based, sorted, unique). None/'' -> all pages."""
    if spec is None or not str(spec).strip():
        return None
    pages: set[int] = set()
    for part in str(spec).split(","):
        part = part.strip()
        if not part:
            continue
        try:
            if "-" in part:
                a, b = part.split("-", 1)
                lo, hi = int(a), int(b)
                if lo < 1 or hi < lo:
                    raise ValueError
                if hi - lo > MAX_PAGE_RANGE:
                    raise InputError(f"--pages {spec!r}: {part!r} spans more than {MAX_PAGE_RANGE:,} pages")
                pages.update(range(lo - 1, hi))
            else:
                n = int(part)
                if n < 1:
                    raise ValueError
                pages.add(n - 1)
        except ValueError:
            raise InputError(f"--pages {spec!r}: {part!r} is not a page number or range like 1-5") from None
    return sorted(pages)
