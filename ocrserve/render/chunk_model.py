"""The chunk format of `<name>.chunks.jsonl` (published as ocrserve/schemas/chunk.schema.json)."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from ocrserve.document import published_schema, write_json_schema

CHUNK_SCHEMA_VERSION = "1.0"


class ChunkBlock(BaseModel):
    """A block a chunk holds: where it is, so that an answer can cite the page and region."""

    model_config = ConfigDict(extra="forbid")

    page: int = Field(description="page number, from 1")
    index: int = Field(description="the block's reading-order index within its page (Block.index)")
    label: str = Field(description="layout label, e.g. Text, Table, Section-Header")
    bbox: list[float] = Field(description="[x0, y0, x1, y1] in the page's coordinates (PDF points or image pixels)")
    bbox_norm: list[float] = Field(description="[x0, y0, x1, y1] normalized to 0-1")


class Chunk(BaseModel):
    """One chunk for retrieval."""

    model_config = ConfigDict(extra="forbid")

    schema_version: str = CHUNK_SCHEMA_VERSION
    id: str = Field(description="stable id: the source's sha256 prefix (else its file name) and the chunk's number")
    index: int = Field(description="the chunk's position in the document, from 0")
    text: str = Field(description="the chunk's Markdown")
    headings: list[str] = Field(
        default_factory=list, description="the heading path the chunk sits under, outermost first"
    )
    pages: list[int] = Field(description="page numbers (from 1) the chunk's blocks are on")
    blocks: list[ChunkBlock] = Field(description="the blocks in the chunk, in reading order")
    labels: list[str] = Field(description="distinct labels of the blocks, in order of appearance")
    tokens: int = Field(description="size of text in tokens, by the counter the chunks were made with")
    source: str = Field(description="path of the source document")


def chunk_json_schema() -> dict:
    return published_schema(Chunk, "chunk", CHUNK_SCHEMA_VERSION)


def write_chunk_json_schema(path: Path) -> None:
    write_json_schema(path, chunk_json_schema())
