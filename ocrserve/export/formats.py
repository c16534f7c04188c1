"""One entry point for every output format: a Document -> (bytes, media type), for files and HTTP.

Formats: md, html, json (the default three), pdf (searchable PDF, built from the source document:
ocrserve.export.searchable_pdf) and chunks (JSON lines for retrieval: ocrserve.render.chunks).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable

from ocrserve.document import Document

FORMATS = ("md", "html", "json", "pdf", "chunks")
DEFAULT_FORMATS = ("md", "html", "json")
MEDIA_TYPES = {
    "md": "text/markdown; charset=utf-8",
    "html": "text/html; charset=utf-8",
    "json": "application/json",
    "pdf": "application/pdf",
    "chunks": "application/x-ndjson",
}
SUFFIXES = {"md": ".md", "html": ".html", "json": ".json", "pdf": ".pdf", "chunks": ".chunks.jsonl"}


def parse_formats(value: str | Iterable[str] | None) -> tuple[str, ...]:
    """`md,html` / ["md", "pdf,chunks"] -> the formats in canonical order (json always included:
    its file marks a document complete). None -> the default three. Unknown names are an error."""
    if value is None:
        return DEFAULT_FORMATS
    items = [value] if isinstance(value, str) else list(value)
    wanted = {f.strip().lower() for item in items for f in str(item).split(",") if f.strip()}
    unknown = sorted(wanted - set(FORMATS))
    if unknown:
        raise ValueError(f"format {', '.join(unknown)}: unknown; use {', '.join(FORMATS)}")
    wanted.add("json")
    return tuple(f for f in FORMATS if f in wanted)


def render_format(doc: Document, fmt: str, source_path: str | Path | None = None, *,
                  keep_headers_footers: bool = False, password: str | None = None,
                  title: str | None = None, paginate: bool = False, images: bool = True,
                  **options: Any) -> tuple[bytes, str]:
    """The Document in format `fmt` as (bytes, media type).

    md: paginate (a `{N}` + 48 dashes line before each page but the first), images=False (no image
    lines); pdf needs the source document (source_path, default doc.source.path; password for an
    encrypted PDF); chunks takes chunk_document's options (max_tokens, tokenizer)."""
    if fmt == "md":
        from ocrserve.render.markdown import render_markdown

        md = render_markdown(doc, keep_headers_footers=keep_headers_footers, paginate=paginate, images=images)
        return md.encode("utf-8"), MEDIA_TYPES[fmt]
    if fmt == "html":
        from ocrserve.render.html import render_html

        return render_html(doc, title=title).encode("utf-8"), MEDIA_TYPES[fmt]
    if fmt == "json":
        from ocrserve.render import render_json

        return render_json(doc).encode("utf-8"), MEDIA_TYPES[fmt]
    if fmt == "pdf":
        from ocrserve.export.searchable_pdf import searchable_pdf

        return searchable_pdf(doc, source_path, password=password), MEDIA_TYPES[fmt]
    if fmt == "chunks":
        from ocrserve.render.chunks import render_chunks_jsonl

        return (render_chunks_jsonl(doc, keep_headers_footers=keep_headers_footers, **options).encode("utf-8"),
                MEDIA_TYPES[fmt])
    raise ValueError(f"format {fmt!r}: unknown; use {', '.join(FORMATS)}")
