"""Output names: each document of a run gets one that no other document holds, and the same one
whatever else the run converts.

A document's plain name is its stem, with its folder relative to the folder given as input
(`a/` -> `a/x.pdf` is `x`; `in/` -> `in/a/x.pdf` is `a/x`), cleaned. Two names clash when they are
the same (case-folded) or one is a folder of the other (`a` beside `a/b`: OUT/a/ cannot hold OUT/a/b/).
A document keeps its plain name unless it is taken:

1. by the output folder: a document there already holds it (or a folder above it), or OUT/<name>
   is a folder of other documents. A document whose own output is already there (its source path)
   keeps that name, plain or hashed, whatever else the run holds;
2. by another document of the same run, in an order that does not depend on the input list: deeper
   names first (a folder tree stays whole beside a file named like one of its folders), then by
   name, a name written as the file is (x_.pdf before x#.pdf for `x_`), then by absolute path.

A part of a name longer than MAX_NAME_BYTES (UTF-8) is cut there and ends in a short hash of the whole
part (`fit_name`): the writer's own names (`.<name>.partial-<run>-<pid>`, `<name>.chunks.jsonl`, ...)
add bytes to it, and a file name of 250 bytes would pass NAME_MAX (255) on its way to the output.

A taken name gets a short hash of the file's absolute path (`report-1a2b3c4d`; under a folder that
is another document's, on the top folder: `a-1a2b3c4d/b`). Whether another file's document under
the name is really another document (or this one, moved: the same content) is decided once its
content hash is known (pipeline/output.choose_name).
"""

from __future__ import annotations

import hashlib
import os
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass
from itertools import groupby
from pathlib import Path


@dataclass(frozen=True)
class Occupant:
    """What the output folder holds under a name: a document (with its source's path, None when its
    JSON does not say), or a folder that is no document (it holds other documents)."""

    document: bool
    path: str | None = None


OccupantOf = Callable[[str], Occupant | None]


# the most bytes a part of an output name takes: what the writer adds (a staging folder's 26 bytes, a
# format's suffix and a temporary file's 27, a taken name's hash 9) stays within NAME_MAX (255)
MAX_NAME_BYTES = 180


def fit_name(name: str) -> str:
    """`name` with each part of it at most MAX_NAME_BYTES long: a longer part cut (at a character) and
    ended with a hash of the whole part, so two long names that start alike stay apart."""
    parts = []
    for part in name.split("/"):
        raw = part.encode("utf-8", "surrogatepass")
        if len(raw) > MAX_NAME_BYTES:
            cut = raw[: MAX_NAME_BYTES - 9].decode("utf-8", "ignore").rstrip()
            part = f"{cut}-{hashlib.sha1(raw).hexdigest()[:8]}"
        parts.append(part)
    return "/".join(parts)


def path_hash(f: Path) -> str:
    """Short, stable hash of a file's absolute path (disambiguates output names)."""
    return hashlib.sha1(str(f.resolve() if f.exists() else f.absolute()).encode()).hexdigest()[:8]


def same_file(recorded: str | None, f: Path) -> bool:
    """Whether a path an output records is this file (as given, absolute, or resolved)."""
    if not recorded:
        return False
    if os.path.abspath(recorded) == os.path.abspath(f):
        return True
    try:
        return os.path.realpath(recorded) == os.path.realpath(f)
    except OSError:
        return False


def candidates(name: str, f: Path) -> list[str]:
    """The names a document may get, in order: plain, hashed, hashed on its top folder."""
    h = path_hash(f)
    out = [name, f"{name}-{h}"]
    if "/" in name:
        top, rest = name.split("/", 1)
        out.append(f"{top}-{h}/{rest}")
    return out


def _ancestors(key: str) -> list[str]:
    parts = key.split("/")
    return ["/".join(parts[:i]) for i in range(1, len(parts))]


class _Claims:
    def __init__(self) -> None:
        self.names: set[str] = set()
        self.folders: set[str] = set()

    def clashes(self, name: str) -> bool:
        k = name.casefold()
        return k in self.names or k in self.folders or any(a in self.names for a in _ancestors(k))

    def add(self, name: str) -> None:
        k = name.casefold()
        self.names.add(k)
        self.folders.update(_ancestors(k))


def assign_names(docs: list[tuple[Path, str, str]], occupant: OccupantOf | None = None) -> list[str]:
    """The output name of each (file, plain name, name as written) in `docs`, in their order.

    `occupant(name)` says what the output folder already holds under a name (None: nothing, or no
    output folder)."""
    docs = [(f, fit_name(name), written) for f, name, written in docs]
    look = occupant or (lambda _name: None)
    memo: dict[str, Occupant | None] = {}

    def at(name: str) -> Occupant | None:
        if name not in memo:
            memo[name] = look(name)
        return memo[name]

    def blocked(name: str) -> bool:
        """Taken in the output folder whatever the content: under another document, or over others."""
        here = at(name)
        if here is not None and not here.document:
            return True
        parts = name.split("/")
        return any((o := at("/".join(parts[:i]))) is not None and o.document for i in range(1, len(parts)))

    order = sorted(
        range(len(docs)),
        key=lambda i: (
            -docs[i][1].count("/"),
            docs[i][1].casefold(),
            docs[i][1] != docs[i][2],
            str(docs[i][0].absolute()),
        ),
    )
    claims = _Claims()
    names: dict[int, str] = {}
    for i in order:  # 1. what is already this file's in the output folder stays its own
        f, name, _ = docs[i]
        for c in candidates(name, f):
            o = at(c)
            if o is not None and o.document and same_file(o.path, f) and not claims.clashes(c):
                names[i] = c
                claims.add(c)
                break
    for i in order:  # 2. the others, in the run's order: the first name free in the run and the folder
        if i in names:
            continue
        f, name, _ = docs[i]
        options = candidates(name, f)
        chosen = next((c for c in options if not claims.clashes(c) and not blocked(c)), options[-1])
        names[i] = chosen
        claims.add(chosen)
    return [names[i] for i in range(len(docs))]


# an uploaded file's name (the HTTP API, the MCP server)
NAME_BYTES = 150  # an upload's name at most (UTF-8): room under the 255-byte limit for what is added to it


def _kept(c: str) -> bool:
    """A letter, mark or digit of any script, or one of `._- ()[]+,`: kept in a file name."""
    return c in "._- ()[]+," or unicodedata.category(c)[0] in "LMN"


def safe_filename(name: str | None) -> str:
    """An uploaded file's name reduced to a safe basename: folders, control and odd characters dropped,
    letters of every script kept ("Zürich.pdf", "报告.pdf"), at most NAME_BYTES bytes (the suffix kept)."""
    base = unicodedata.normalize("NFKC", (name or "")[-2000:].replace("\\", "/")).rsplit("/", 1)[-1]
    # anything else (controls, quotes, symbols), a run of it, becomes one `_`
    base = "".join(c if ok else "_" for ok, run in groupby(base, _kept) for c in (run if ok else "_")).strip(" .")
    if len(base.encode()) > NAME_BYTES:
        stem, dot, suffix = base.rpartition(".")
        suffix = dot + suffix if stem and len(suffix) <= 16 else ""
        stem = base[: len(base) - len(suffix)]
        room = NAME_BYTES - len(suffix.encode())
        base = stem.encode()[:room].decode("utf-8", errors="ignore").rstrip(" .") + suffix
    return base or "upload"
