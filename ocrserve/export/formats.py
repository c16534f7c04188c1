"""The output formats: one record each (OutputFormat) in one registry, from which everything that
handles formats derives: the writer and the completeness check (pipeline/output.py, target.py),
ConvertOptions' `formats` (an unknown name is an error naming the known ones), the CLI's `--format`
help, and the API's `format` parameter, media types and stream rule.

Built in: md, html, json (the default three; json is always written: its file marks a document
complete), pdf (the searchable PDF: the source pages with a text layer, export/searchable_pdf.py),
chunks (JSON lines for retrieval, render/chunks.py) and txt (plain text, render/text.py). Adding a
format is one `register_format(OutputFormat(...))` with its renderer `(doc, ctx) -> bytes | str`,
ctx being the one RenderContext every renderer gets.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from ocrserve.document import Document


@dataclass(frozen=True)
class RenderContext:
    """What a renderer may need beside the Document (the same object for every format)."""

    keep_headers_footers: bool = False  # page headers and footers kept (md, txt, chunks)
    paginate: bool = False  # a `{N}` + 48 dashes line before each page but the first (md, txt)
    images: bool = True  # image lines in the Markdown
    password: str | None = None  # of an encrypted source PDF (pdf)
    source: str | Path | None = None  # the source document (None: doc.source.path), for a format that needs it
    title: str | None = None  # the HTML page's title (None: the source's file name)
    options: Mapping[str, Any] = field(default_factory=dict)  # a format's own (chunks: max_tokens, tokenizer)


Renderer = Callable[[Document, RenderContext], "bytes | str"]


@dataclass(frozen=True)
class OutputFormat:
    """One output format: the file `<name>/<basename><suffix>` and the API's `?format=<name>`."""

    name: str  # lower case: --format's and ?format='s value
    suffix: str  # of the file, with its dot: .md, .chunks.jsonl
    media_type: str  # of the HTTP answer
    render: Renderer  # (doc, ctx) -> bytes | str (str is written as UTF-8)
    title: str = ""  # what it is, in the CLI help and in errors: "searchable PDF"
    needs_source: bool = False  # built from the source document too (pdf): not for a finished job's result
    whole_document: bool = False  # not in a streamed answer (the API's stream=true refuses it)
    always: bool = False  # written by every run, last (json: its file marks the document complete)
    default: bool = False  # written when no format is asked for
    event_key: str | None = None  # the key of its rendering in a stream's `done` event (md: markdown)

    def to_bytes(self, doc: Document, ctx: RenderContext | None = None) -> bytes:
        """The rendering as bytes (a str renderer's answer in UTF-8)."""
        data = self.render(doc, ctx or RenderContext())
        return data.encode("utf-8") if isinstance(data, str) else data


_FORMATS: dict[str, OutputFormat] = {}
_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]*$")


def register_format(fmt: OutputFormat, *, replace_existing: bool = False) -> OutputFormat:
    """Add a format (or, with replace_existing, replace the one of that name). Its name must be a
    plain lower-case word and its file suffix must be its own: two formats never write one file."""
    if not _NAME.match(fmt.name):
        raise ValueError(f"format {fmt.name!r}: a name is lower-case letters, digits, - and _")
    if not fmt.suffix.startswith(".") or "/" in fmt.suffix:
        raise ValueError(f"format {fmt.name}: suffix {fmt.suffix!r} must start with a dot and name a file")
    if fmt.name in _FORMATS and not replace_existing:
        raise ValueError(f"format {fmt.name}: already registered")
    clash = [f.name for f in _FORMATS.values() if f.name != fmt.name and f.suffix == fmt.suffix]
    if clash:
        raise ValueError(f"format {fmt.name}: suffix {fmt.suffix} is format {clash[0]}'s")
    _FORMATS[fmt.name] = fmt
    return fmt


def unregister_format(name: str) -> None:
    """Remove a format added with register_format (a no-op for an unknown name)."""
    _FORMATS.pop(name, None)


def output_formats() -> tuple[OutputFormat, ...]:
    """Every registered format, in the canonical order (the built-ins first, then as registered)."""
    return tuple(_FORMATS.values())


def format_names() -> tuple[str, ...]:
    return tuple(_FORMATS)


def default_formats() -> tuple[str, ...]:
    """What a run writes when no format is asked for (md, html, json)."""
    return tuple(f.name for f in _FORMATS.values() if f.default or f.always)


def get_format(name: str) -> OutputFormat:
    """The format of that name; an unknown one is a ValueError naming the known ones."""
    fmt = _FORMATS.get(name)
    if fmt is None:
        raise ValueError(f"format {name!r}: unknown; use {', '.join(_FORMATS)}")
    return fmt


def parse_formats(value: str | Iterable[str] | None) -> tuple[str, ...]:
    """`md,html` / ["md", "pdf,chunks"] -> the formats in canonical order, with every always-written
    one (json: its file marks a document complete). None -> default_formats(). Unknown names are an
    error naming the known ones."""
    if value is None:
        return default_formats()
    items = [value] if isinstance(value, str) else list(value)
    wanted = {f.strip().lower() for item in items for f in str(item).split(",") if f.strip()}
    unknown = sorted(wanted - set(_FORMATS))
    if unknown:
        raise ValueError(f"format {', '.join(unknown)}: unknown; use {', '.join(_FORMATS)}")
    return tuple(f.name for f in _FORMATS.values() if f.name in wanted or f.always)


def formats_help() -> str:
    """The formats for a help text: `md (Markdown), ..., chunks (JSON lines for retrieval: <name>.chunks.jsonl)`."""

    def one(f: OutputFormat) -> str:
        where = "" if f.suffix == f".{f.name}" else f"<name>{f.suffix}"
        what = ": ".join(x for x in (f.title, where) if x)
        return f"{f.name} ({what})" if what else f.name

    return ", ".join(one(f) for f in _FORMATS.values())


_CONTEXT_FIELDS = {f.name for f in fields(RenderContext)}


def render_format(doc: Document, fmt: str, ctx: RenderContext | None = None, **values: Any) -> tuple[bytes, str]:
    """The Document in format `fmt` as (bytes, media type). `values` set RenderContext fields on top
    of ctx (keep_headers_footers=True, source=..., ...); any other keyword is a format's own option
    (ctx.options: chunks takes chunk_document's max_tokens and tokenizer)."""
    f = get_format(fmt)
    own = {k: v for k, v in values.items() if k not in _CONTEXT_FIELDS}
    ctx = replace(ctx or RenderContext(), **{k: v for k, v in values.items() if k in _CONTEXT_FIELDS})
    if own:
        ctx = replace(ctx, options={**ctx.options, **own})
    return f.to_bytes(doc, ctx), f.media_type


# -- the built-in formats -----------------------------------------------------------------------
def _md(doc: Document, ctx: RenderContext) -> str:
    from ocrserve.render.markdown import render_markdown

    return render_markdown(doc, keep_headers_footers=ctx.keep_headers_footers, paginate=ctx.paginate, images=ctx.images)


def _html(doc: Document, ctx: RenderContext) -> str:
    from ocrserve.render.html import render_html

    return render_html(doc, title=ctx.title)


def _json(doc: Document, ctx: RenderContext) -> str:
    from ocrserve.render import render_json

    return render_json(doc)


def _pdf(doc: Document, ctx: RenderContext) -> bytes:
    from ocrserve.export.searchable_pdf import searchable_pdf

    return searchable_pdf(doc, ctx.source, password=ctx.password)


def _chunks(doc: Document, ctx: RenderContext) -> str:
    from ocrserve.render.chunks import render_chunks_jsonl

    return render_chunks_jsonl(doc, **{"keep_headers_footers": ctx.keep_headers_footers, **ctx.options})


def _txt(doc: Document, ctx: RenderContext) -> str:
    from ocrserve.render.text import render_text

    return render_text(doc, keep_headers_footers=ctx.keep_headers_footers, paginate=ctx.paginate)


for _f in (
    OutputFormat("md", ".md", "text/markdown; charset=utf-8", _md, "Markdown", default=True, event_key="markdown"),
    OutputFormat("html", ".html", "text/html; charset=utf-8", _html, "HTML", default=True, event_key="html"),
    OutputFormat("json", ".json", "application/json", _json, "the Document", always=True),
    OutputFormat("pdf", ".pdf", "application/pdf", _pdf, "searchable PDF", needs_source=True, whole_document=True),
    OutputFormat(
        "chunks", ".chunks.jsonl", "application/x-ndjson", _chunks, "JSON lines for retrieval", whole_document=True
    ),
    OutputFormat("txt", ".txt", "text/plain; charset=utf-8", _txt, "plain text", event_key="text"),
):
    register_format(_f)

DEFAULT_FORMATS = default_formats()  # the built-in defaults, md, html, json (default_formats() is the live answer)
