"""The engine interface. Every engine answers in Chandra's raw HTML layout-block form.

Engines own retries: a repetition loop or a cut-off answer is retried with the profile's retry
sampling; connection errors back off; when an engine gives up it returns `ok=False` with the error,
and the pipeline hands the page to the fallback engine (lite, through engines/fallback.py's wrapper).
Engines never raise for a page.

An engine class carries its contract: `name`, `Options` (an `EngineOptions` model: each option's type,
default and description, and the Settings knob that gives a default) and its traits (`needs_gpu`,
`ray_batch_size`, `batched`, `cpu_bound`, `model_engine`, `preflight_on_driver`); engines/registry.py
registers it by name. Engines read nothing from Settings: `create_engine` resolves their options.
"""

from __future__ import annotations

import abc
import asyncio
import io
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from PIL import Image
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ocrserve.errors import OcrserveError
from ocrserve.profiles import Profile

if TYPE_CHECKING:
    from ocrserve.ingest.pool import ResilientPool


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
        self.doc_id = doc_id  # stable id of the document within a run
        self.index = index  # page index in the source, from 0
        self._image = image  # page image sized for the model (pixel budget, patch grid)
        size = image_size or (image.size if image is not None else None)
        if size is None and not (width and height):
            raise ValueError("PageInput from PNG bytes alone needs image_size or the page's width and height")
        self.width = width or float(size[0] if size else 0)  # original page size
        self.height = height or float(size[1] if size else 0)
        self.unit = unit  # "pt" for PDF pages, "px" for images
        self.source_path = source_path  # the source file (lite reads a PDF's text layer from it)
        self.source_type = source_type  # pdf, png, jpeg, ...
        self.password = password  # PDF password, if any
        self.png = png  # the image PNG-encoded (level 1)
        self.render_s = render_s
        self.image_size = size

    @property
    def image(self) -> Image.Image:
        if self._image is None:
            assert self.png is not None  # a PageInput always holds the image or its PNG
            self._image = Image.open(io.BytesIO(self.png)).convert("RGB")
            self.image_size = self._image.size
        return self._image

    @image.setter
    def image(self, value: Image.Image) -> None:
        self._image, self.png, self.image_size = value, None, value.size

    def png_bytes(self) -> bytes:
        if self.png is None:
            buf = io.BytesIO()
            self.image.save(buf, format="PNG", compress_level=1)  # no PNG: the image is held
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
    finish_reason: str | None = None  # stop, length, loop, error
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    error: str | None = None  # why the engine gave up (ok=False), or the last retried problem
    elapsed_s: float = 0.0
    extra: dict = field(default_factory=dict)
    rescued: bool = False  # the fallback's answer for a page the engine gave up on (error: the engine's)


def engine_error(engine_name: str, e: BaseException) -> EngineResult:
    """An engine that raised for a page (a bug: engines answer ok=False) still leaves the page a result."""
    return EngineResult(ok=False, engine=engine_name, error=f"engine error: {e!r}")


# called with each new piece of raw text while a page is being generated (streaming engines);
# an empty string means "a retry starts: discard the text so far"
DeltaCallback = Callable[[str], Awaitable[None] | None]


class EngineOptions(BaseModel):
    """The options an engine takes: each a field with its type, default and description. An engine's
    model subclasses this one; `settings_defaults` names, for an option, the Settings knob whose value
    `create_engine` gives it when it is not chosen (the engine itself reads no Settings)."""

    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True, protected_namespaces=())

    settings_defaults: ClassVar[dict[str, str]] = {}

    @classmethod
    def check(cls, engine: str, values: dict[str, Any]) -> EngineOptions:
        """The options from `values`; an unknown option or a bad value is an EngineError naming it (and,
        for an unknown one, the options the engine takes)."""
        unknown = sorted(k for k in values if k not in cls.model_fields)
        if unknown:
            raise EngineError(
                f"engine {engine!r} does not take option(s) {', '.join(repr(k) for k in unknown)}"
                f" (it takes: {', '.join(sorted(cls.model_fields)) or 'none'})"
            )
        try:
            return cls(**values)
        except ValidationError as e:
            bad = "; ".join(f"option {'.'.join(str(x) for x in err['loc'])!r}: {err['msg']}" for err in e.errors())
            raise EngineError(f"engine {engine!r}: {bad}") from None


class GenerationOptions(EngineOptions):
    """The options every engine that runs Chandra takes (openai, hf, vllm), declared once here: a page's
    output budget and the retries of an answer that loops or is cut off (engines/policy.py's Ladder)."""

    max_tokens: int | None = Field(None, ge=1, description="output token limit a page (unset: the profile's)")
    max_retries: int | None = Field(None, ge=0, description="retries of a looping answer (unset: the profile's)")
    ignore_eos: bool = Field(False, description="benchmarks: always generate max_tokens, retry nothing")


def deadline_option(description: str) -> Any:
    """An engine's `timeout`: the seconds (more than 0) a piece of its work may take; unset (None): the
    default its description names."""
    return Field(None, gt=0, description=description)


class Engine(abc.ABC):
    """The base class of the engines: `ocr` is theirs to write; the optional methods have defaults.

    The class attributes are the engine's contract, read from the class (the Ray scheduler, the
    registry) or from an instance (a wrapper sets its own from the engine it wraps):
    - `name`: what the engine is called (`create_engine(name)`, `--engine`, Page.engine);
    - `Options`: its options model (EngineOptions); it is built as `cls.create(profile, options)`;
    - `batched`: `ocr_batch` is the engine's own way of working (a whole batch in one call, the
      in-process vLLM engine): the Ray stage hands it whole batches; for the others the default
      `ocr_batch` runs `ocr` for each page concurrently;
    - `needs_gpu`: on a Ray cluster with GPUs, one engine actor per GPU; `ray_batch_size`: pages a
      batch to a Ray engine actor; `cpu_bound`: without GPUs, its work is on the actor's CPUs (an
      actor per two CPUs), else one actor keeps `capacity()` pages in flight;
    - `model_engine`: a model reads the pages, so a page it gives up on is rescued by the fallback
      engine and a page that still looped is filled in (False: the engine is no model; lite is the
      fallback itself);
    - `preflight_on_driver`: building one and its `preflight` cost nothing (an HTTP client): the Ray
      driver runs it before any page, and the profile it settles on is the run's.
    A wrapper keeps the engine it wraps in `inner` (`innermost()` finds the engine doing the work).
    """

    name: str = ""
    Options: ClassVar[type[EngineOptions]] = EngineOptions
    batched: bool = False
    needs_gpu: ClassVar[bool] = False
    ray_batch_size: ClassVar[int] = 8
    cpu_bound: ClassVar[bool] = False
    model_engine: bool = True
    preflight_on_driver: ClassVar[bool] = False
    profile: Profile

    @classmethod
    def create(cls, profile: Profile | str | None, options: EngineOptions) -> Engine:
        """Build the engine from its resolved options (create_engine's last step; an engine that is
        several engines, such as openai with several servers, says so here)."""
        # Engine itself declares no constructor: the registered engines take (profile, options), the
        # wrappers (fallback, multi-server), built otherwise, do not
        return cls(profile, options)  # type: ignore[call-arg]

    @classmethod
    def options_of(cls, options: EngineOptions | None, values: dict[str, Any]) -> Any:
        """For a constructor: `options` (resolved by create_engine) or keyword `values`, checked by the model."""
        if options is not None and values:
            raise EngineError(f"engine {cls.name!r}: give its options as one {cls.Options.__name__} or as keywords")
        return options if options is not None else cls.Options.check(cls.name, values)

    def innermost(self) -> Engine:
        """The engine under any wrappers (each keeps the engine it wraps in `inner`): its traits count."""
        eng: Engine = self
        inner = getattr(eng, "inner", None)
        while isinstance(inner, Engine):
            eng, inner = inner, getattr(inner, "inner", None)
        return eng

    @abc.abstractmethod
    async def ocr(self, page: PageInput, *, on_delta: DeltaCallback | None = None) -> EngineResult:
        """OCR one page. Never raises for a page: failures come back as ok=False."""

    async def ocr_batch(self, pages: list[PageInput]) -> list[EngineResult]:
        """OCR several pages: the default runs `ocr` for each, concurrently, results in order."""
        return list(await asyncio.gather(*(self.ocr(p) for p in pages)))

    def capacity(self) -> int:
        """How many pages this engine wants in flight at once (the pipeline's concurrency)."""
        return 1

    def pool_workers(self) -> tuple[int, Callable[..., None], tuple] | None:
        """For an engine whose pages run in worker processes it can share with the run's rendering (lite): the
        processes it asks for, and the initializer (with its arguments) each must start with; None: it runs
        no work there. A run that shares its pool then hands it over with `use_pool`."""
        return None

    def use_pool(self, pool: ResilientPool) -> None:  # noqa: B027 - an optional hook, for pool_workers' engines
        """Run pages in `pool` from now on: the run's pool, made with pool_workers' initializer, closed by the run."""

    async def preflight(self) -> None:  # noqa: B027 - an optional hook: by default nothing to check
        """Raise EngineError when the engine cannot work at all (server down, key refused); default: nothing."""

    async def check(self) -> bool:
        """Whether the engine can take pages now (the service's readiness); default: yes."""
        return True

    async def aclose(self) -> None:  # noqa: B027 - an optional hook: by default nothing to release
        """Release what the engine holds (clients, processes); default: nothing."""


# options the pipeline hands to whichever engine it builds (Converter: concurrency; Ray: server and
# concurrency): an engine whose Options do not declare one of them is built without it
PIPELINE_OPTIONS = frozenset({"concurrency", "server"})


def engine_options(cls: type[Engine]) -> frozenset[str] | None:
    """The option names an engine class takes: its Options model's fields."""
    return frozenset(cls.Options.model_fields)


class EngineError(OcrserveError):
    """An engine cannot be set up at all (bad server URL, checkpoint not found, ...)."""
