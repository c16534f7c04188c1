"""The engine interface. Every engine answers in Chandra's raw HTML layout-block form.

Engines own retries: a repetition loop or a cut-off answer is retried with the profile's retry
sampling; connection errors back off; when an engine gives up it returns `ok=False` with the error,
and the pipeline hands the page to the fallback engine (lite). Engines never raise for a page.
"""

from __future__ import annotations

import io
from dataclasses import dataclass, field
from typing import Awaitable, Callable, Protocol, runtime_checkable

from PIL import Image

from ..profiles import Profile


@dataclass
class PageInput:
    """One page as the engines see it."""

    doc_id: str                     # stable id of the document within a run
    index: int                      # page index in the source, from 0
    image: Image.Image              # page image sized for the model (profile pixel budget, patch grid)
    width: float                    # original page size (PDF points or image pixels)
    height: float
    unit: str = "pt"                # "pt" for PDF pages, "px" for images
    source_path: str | None = None  # the source file (lite reads a PDF's text layer from it)
    source_type: str = "pdf"        # pdf, png, jpeg, ...
    password: str | None = None     # PDF password, if any
    png: bytes | None = None        # the image PNG-encoded (level 1), when the renderer made it
    render_s: float = 0.0

    def png_bytes(self) -> bytes:
        if self.png is None:
            buf = io.BytesIO()
            self.image.save(buf, format="PNG", compress_level=1)
            self.png = buf.getvalue()
        return self.png


@dataclass
class EngineResult:
    """What an engine answers for one page."""

    raw: str = ""
    ok: bool = True
    engine: str = ""
    attempts: int = 1
    finish_reason: str | None = None   # stop, length, loop, error
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    error: str | None = None           # why the engine gave up (ok=False), or the last retried problem
    elapsed_s: float = 0.0
    extra: dict = field(default_factory=dict)


# called with each new piece of raw text while a page is being generated (streaming engines)
DeltaCallback = Callable[[str], Awaitable[None] | None]


@runtime_checkable
class Engine(Protocol):
    name: str
    profile: Profile

    async def ocr(self, page: PageInput, *, on_delta: DeltaCallback | None = None) -> EngineResult:
        """OCR one page. Never raises for a page: failures come back as ok=False."""
        ...

    def capacity(self) -> int:
        """How many pages this engine wants in flight at once (the pipeline's concurrency)."""
        ...

    async def aclose(self) -> None:
        ...


class EngineError(Exception):
    """An engine cannot be set up at all (bad server URL, checkpoint not found, ...)."""
