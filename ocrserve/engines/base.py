"""The engine interface. Every engine answers in Chandra's raw HTML layout-block form.

Engines own retries: a repetition loop or a cut-off answer is retried with the profile's retry
sampling; connection errors back off; when an engine gives up it returns `ok=False` with the error,
and the pipeline hands the page to the fallback engine (lite). Engines never raise for a page.
"""

from __future__ import annotations

import abc
import asyncio
import inspect
import io
from dataclasses import dataclass, field
from typing import Awaitable, Callable, ClassVar

from PIL import Image

from ocrserve.profiles import Profile
from ocrserve.errors import OcrserveError


class PageInput:
    """One page as the engines see it.

    The renderer hands over the PNG (encoded in its worker process); `image` is decoded from it
    only when an engine or the figure cropper asks, so the request path never pays for a decode.
    """

    def __init__(
        self,
        doc_id: str,
        index: int,
        image: Image.Image | None = None,
        width: float = 0.0,
        height: float = 0.0,
        unit: str = "pt",
        source_path: str | None = None,
        source_type: str = "pdf",
        password: str | None = None,
        png: bytes | None = None,
        render_s: float = 0.0,
        image_size: tuple[int, int] | None = None,
    ) -> None:
        if image is None and png is None:
            raise ValueError("PageInput needs an image or its PNG bytes")
        self.doc_id = doc_id                # stable id of the document within a run
        self.index = index                  # page index in the source, from 0
        self._image = image                 # page image sized for the model (pixel budget, patch grid)
        self.width = width or float(image_size[0] if image_size else image.width)  # original page size
        self.height = height or float(image_size[1] if image_size else image.height)
        self.unit = unit                    # "pt" for PDF pages, "px" for images
        self.source_path = source_path      # the source file (lite reads a PDF's text layer from it)
        self.source_type = source_type      # pdf, png, jpeg, ...
        self.password = password            # PDF password, if any
        self.png = png                      # the image PNG-encoded (level 1)
        self.render_s = render_s
        self.image_size = image_size or (image.size if image is not None else None)

    @property
    def image(self) -> Image.Image:
        if self._image is None:
            self._image = Image.open(io.BytesIO(self.png)).convert("RGB")
            self.image_size = self._image.size
        return self._image

    @image.setter
    def image(self, value: Image.Image) -> None:
        self._image, self.png, self.image_size = value, None, value.size

    def png_bytes(self) -> bytes:
        if self.png is None:
            buf = io.BytesIO()
            self._image.save(buf, format="PNG", compress_level=1)
            self.png = buf.getvalue()
        return self.png

    def drop_image(self) -> None:
        """Free the decoded image (the PNG stays)."""
        if self.png is not None:
            self._image = None

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        if state.get("png") is not None:
            state["_image"] = None  # ship the compact PNG across processes, not raw pixels
        return state

    def __repr__(self) -> str:
        return f"PageInput(doc_id={self.doc_id!r}, index={self.index}, size={self.image_size}, source={self.source_path!r})"


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


# called with each new piece of raw text while a page is being generated (streaming engines);
# an empty string means "a retry starts: discard the text so far"
DeltaCallback = Callable[[str], Awaitable[None] | None]


class Engine(abc.ABC):
    """The base class of the engines: `ocr` is theirs to write; the optional methods have defaults.

    `batched` says that `ocr_batch` is the engine's own way of working (a whole batch in one call,
    the in-process vLLM engine): the Ray stage then hands it whole batches; for the others the default
    `ocr_batch` runs `ocr` for each page concurrently.
    """

    name: str = ""
    batched: ClassVar[bool] = False
    profile: Profile

    @abc.abstractmethod
    async def ocr(self, page: PageInput, *, on_delta: DeltaCallback | None = None) -> EngineResult:
        """OCR one page. Never raises for a page: failures come back as ok=False."""

    async def ocr_batch(self, pages: list[PageInput]) -> list[EngineResult]:
        """OCR several pages: the default runs `ocr` for each, concurrently, results in order."""
        return list(await asyncio.gather(*(self.ocr(p) for p in pages)))

    def capacity(self) -> int:
        """How many pages this engine wants in flight at once (the pipeline's concurrency)."""
        return 1

    async def preflight(self) -> None:
        """Raise EngineError when the engine cannot work at all (server down, key refused); default: nothing."""

    async def check(self) -> bool:
        """Whether the engine can take pages now (the service's readiness); default: yes."""
        return True

    async def aclose(self) -> None:
        """Release what the engine holds (clients, processes); default: nothing."""


# options the pipeline hands to whichever engine it builds (Converter: concurrency; Ray: server and
# concurrency): an engine that does not take one of them is built without it
PIPELINE_OPTIONS = frozenset({"concurrency", "server"})


def engine_options(cls: type) -> frozenset[str] | None:
    """The option names an engine class's __init__ takes (beyond profile and settings); None when it
    takes any (**kwargs: a wrapper)."""
    params = inspect.signature(cls.__init__).parameters
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return None
    return frozenset(n for n, p in params.items()
                     if n not in ("self", "profile", "settings") and p.kind is not inspect.Parameter.VAR_POSITIONAL)


def check_options(engine: str, cls: type, options: dict) -> dict:
    """The options to build `cls` with: None values dropped, pipeline options it does not take dropped;
    any other option it does not take is an EngineError naming them."""
    options = {k: v for k, v in options.items() if v is not None}
    accepted = engine_options(cls)
    if accepted is None:
        return options
    unknown = sorted(k for k in options if k not in accepted and k not in PIPELINE_OPTIONS)
    if unknown:
        names = ", ".join(repr(k) for k in unknown)
        raise EngineError(f"engine {engine!r} does not take option(s) {names}"
                          f" (it takes: {', '.join(sorted(accepted)) or 'none'})")
    return {k: v for k, v in options.items() if k in accepted}


class EngineError(OcrserveError):
    """An engine cannot be set up at all (bad server URL, checkpoint not found, ...)."""
