"""The one data model: Document -> Page -> Block. Its JSON is versioned (SCHEMA_VERSION)."""

from __future__ import annotations

import json
from enum import StrEnum
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

SCHEMA_VERSION = "1.1"  # 1.1: Page.truncated/looped, Block.origin, Document.metadata

BboxSource = Literal["model", "fixed", "missing"]  # where a block's box came from (Block.bbox_source)


class PageStatus(StrEnum):
    """How a page was obtained: ok (its engine), fallback (rescued whole by the fallback), failed."""

    OK = "ok"
    FALLBACK = "fallback"
    FAILED = "failed"


def _utf8(v):
    if isinstance(v, str):
        try:
            v.encode("utf-8")
        except UnicodeEncodeError:
            return v.encode("utf-8", "replace").decode("utf-8")
    return v


class Block(BaseModel):
    """One layout block of a page, in reading order."""

    model_config = ConfigDict(extra="forbid")

    index: int = Field(description="reading-order index within the page, from 0")
    label: str = Field(description="layout label as the model wrote it, e.g. Text, Table, Section-Header")
    bbox: list[float] = Field(description="[x0, y0, x1, y1] in original page coordinates (PDF points or image pixels)")
    bbox_norm: list[float] = Field(description="[x0, y0, x1, y1] normalized to 0-1")
    bbox_source: BboxSource = Field(
        "model", description="model: as written; fixed: repaired (reversed/clamped/partial); missing: whole page"
    )
    html: str = Field(description="sanitized inner HTML of the block")
    markdown: str = Field("", description="the block rendered as Markdown")
    text: str = Field("", description="plain text of the block")
    figure: str | None = Field(None, description="path of the cropped figure, relative to the document folder")
    truncated: bool = Field(False, description="the block was cut off (unterminated in the model output)")
    origin: Literal["engine", "fallback"] = Field(
        "engine",
        description="engine: written by the page's engine; fallback: filled in by the fallback engine "
        "where the model's answer (cut where it looped) gave nothing",
    )

    @field_validator("label", "html", "markdown", "text", "figure", mode="before")
    @classmethod
    def _valid_utf8(cls, v):
        """Lone surrogates cannot be written as UTF-8 JSON: replace them, whoever built the block."""
        return _utf8(v)


class PageTimings(BaseModel):
    model_config = ConfigDict(extra="allow")

    render_s: float | None = None
    engine_s: float | None = None
    parse_s: float | None = None


class Page(BaseModel):
    """One page: its blocks and how it was obtained."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)  # page.status = "failed" -> the enum

    index: int = Field(description="page index in the source, from 0")
    width: float = Field(description="page width in original coordinates (PDF points or pixels)")
    height: float = Field(description="page height in original coordinates")
    unit: Literal["pt", "px"] = "pt"
    image_width: int | None = Field(None, description="width of the image sent to the engine")
    image_height: int | None = Field(None, description="height of the image sent to the engine")
    status: PageStatus = PageStatus.OK
    engine: str | None = None
    attempts: int = 0
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    timings: PageTimings = Field(default_factory=PageTimings)
    error: str | None = Field(
        None, description="why the page failed, or why the model engine gave up before the fallback"
    )
    truncated: bool = Field(
        False,
        description="the model's answer reached max_tokens; it is kept as it is (raise --max-tokens for longer pages)",
    )
    looped: bool = Field(
        False,
        description="the model still looped after its last retry: its text before the "
        "loop is kept, the fallback filled in the rest (blocks with origin fallback)",
    )
    blocks: list[Block] = Field(default_factory=list)
    raw: str | None = Field(None, description="raw engine output (kept when asked for)")

    @field_validator("error", "raw", mode="before")
    @classmethod
    def _valid_utf8(cls, v):
        return _utf8(v)

    @property
    def markdown(self) -> str:
        return "\n\n".join(b.markdown for b in self.blocks if b.markdown)


class Source(BaseModel):
    model_config = ConfigDict(extra="forbid")

    path: str
    sha256: str | None = None
    type: str = Field(
        description="pdf, png, jpeg, webp, tiff, bmp, gif; an Office file (read as the PDF LibreOffice "
        "makes of it): docx, xlsx, pptx, odt, ods, odp, rtf, html, doc, xls, ppt"
    )
    page_count: int


class Summary(BaseModel):
    """Counts over a document's pages (upstream's per-document metadata, and more)."""

    model_config = ConfigDict(extra="forbid")

    pages: int = 0
    pages_ok: int = 0
    pages_fallback: int = 0
    pages_failed: int = 0
    pages_truncated: int = 0
    pages_looped: int = 0
    blocks: int = 0
    blocks_fallback: int = Field(0, description="blocks the fallback filled in on looped pages")
    images: int = Field(0, description="figure crops")
    prompt_tokens: int = 0
    completion_tokens: int = 0

    @classmethod
    def of(cls, pages: list[Page]) -> Summary:
        blocks = [b for p in pages for b in p.blocks]
        return cls(
            pages=len(pages),
            pages_ok=sum(p.status == "ok" for p in pages),
            pages_fallback=sum(p.status == "fallback" for p in pages),
            pages_failed=sum(p.status == "failed" for p in pages),
            pages_truncated=sum(p.truncated for p in pages),
            pages_looped=sum(p.looped for p in pages),
            blocks=len(blocks),
            blocks_fallback=sum(b.origin == "fallback" for b in blocks),
            images=sum(b.figure is not None for b in blocks),
            prompt_tokens=sum(p.prompt_tokens or 0 for p in pages),
            completion_tokens=sum(p.completion_tokens or 0 for p in pages),
        )


class Document(BaseModel):
    """A converted document."""

    model_config = ConfigDict(extra="forbid")

    schema_version: str = SCHEMA_VERSION
    source: Source
    model: str | None = Field(None, description="model profile or served model name")
    metadata: Summary | None = Field(None, description="counts over the pages (set when the document is assembled)")
    pages: list[Page] = Field(default_factory=list)

    @property
    def status(self) -> PageStatus:
        if any(p.status == PageStatus.FAILED for p in self.pages):
            return PageStatus.FAILED
        if any(p.status == PageStatus.FALLBACK for p in self.pages):
            return PageStatus.FALLBACK
        return PageStatus.OK


def published_schema(model: type[BaseModel], name: str, version: str) -> dict:
    """The JSON Schema of a published format (ocrserve/schemas/<name>.schema.json)."""
    schema = model.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["$id"] = f"https://ocrserve.dev/schemas/{name}-{version}.json"
    return schema


def json_schema() -> dict:
    """JSON Schema of the Document JSON (published as ocrserve/schemas/document.schema.json)."""
    return published_schema(Document, "document", SCHEMA_VERSION)


def write_json_schema(path: Path, schema: dict | None = None) -> None:
    path.write_text(json.dumps(schema or json_schema(), indent=2) + "\n", encoding="utf-8")
