"""Per-document output: OUT/<name>/<basename>.{md,html,json} + images/, written atomically.
With formats: also <basename>.pdf (searchable PDF) and <basename>.chunks.jsonl (retrieval chunks).

Pages' figure crops go to a hidden staging folder as pages finish; when the last page is back the
Markdown, HTML and JSON are written there and the folder is swapped into place with a rename, so
an interrupted run never leaves a half-written document that looks complete. A document counts as
done when its JSON is there, its source hash matches, and no page failed.
"""

from __future__ import annotations

import json
import os
import shutil
import uuid
from pathlib import Path

from ocrserve.document import Document
from ocrserve.render import render_html, render_json, render_markdown
from ocrserve.render.formats import DEFAULT_FORMATS, SUFFIXES, render_format


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


_UNREAD = object()


def is_complete(out: Path, name: str, sha256: str | None, indices: list[int] | None = None, data=_UNREAD,
                formats: tuple[str, ...] | None = None) -> bool:
    """True when a finished output for this exact source, holding every wanted page, is there.
    `data`: that output's JSON when the caller has already read it (load_output). `formats`: the
    files that must be there too (a run asking for a format the earlier one did not write redoes it)."""
    base = name.rsplit("/", 1)[-1]
    if formats and not all((out / name / f"{base}{SUFFIXES[f]}").is_file() for f in formats if f in SUFFIXES):
        return False
    if data is _UNREAD:
        data = load_output(out, name)
    if data is None:
        return False
    if sha256 and (data.get("source") or {}).get("sha256") != sha256:
        return False
    pages = data.get("pages", [])
    if indices is not None and not set(indices) <= {pg.get("index") for pg in pages}:
        return False  # converted with another --pages selection
    return all((pg.get("status") != "failed") for pg in pages)


def write_document(
    doc: Document, out: Path, name: str, staging: Path | None = None, *, keep_headers_footers: bool = False,
    formats: tuple[str, ...] = DEFAULT_FORMATS, password: str | None = None,
) -> Path:
    """Write the document's files into staging (holding its figure crops) and swap it into place.
    formats: any of md, html, json, pdf, chunks (json is always written: it marks the document
    complete); pdf is built from the source (doc.source.path; `password` for an encrypted PDF)."""
    from ocrserve.render.searchable_pdf import SearchablePdfError

    base = name.rsplit("/", 1)[-1]
    final = out / name
    final.parent.mkdir(parents=True, exist_ok=True)
    staging = staging or staging_dir(out, name, uuid.uuid4().hex[:8])
    staging.mkdir(parents=True, exist_ok=True)
    if "md" in formats:
        (staging / f"{base}.md").write_text(render_markdown(doc, keep_headers_footers=keep_headers_footers), encoding="utf-8")
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
