"""The options of a conversion, typed once for the CLI, the Python API, the local and the Ray scheduler.

`ConvertOptions` holds what the user chose (None = not chosen); `resolve(settings)` fills every
default from Settings in this one place, and picks the engine by the one rule (engines.engine_for:
openai when a server is given, else lite). Unknown options are an error naming them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from ocrserve.engines import engine_for
from ocrserve.profiles import Profile
from ocrserve.export.formats import DEFAULT_FORMATS, parse_formats
from ocrserve.settings import Settings, get_settings
from ocrserve.errors import OcrserveError

Format = Literal["md", "html", "json", "pdf", "chunks"]

# options that go to the engine as they are (each engine takes its own; create_engine checks them)
ENGINE_FIELDS = ("server", "api_key", "served_model", "checkpoint", "device", "batch_size", "max_tokens", "max_retries",
                 "ignore_eos", "static_cache")


class OptionsError(OcrserveError, ValueError):
    """Conversion options that do not fit (an unknown option, a bad value)."""


class RayOptions(BaseModel):
    """How a run is spread over a Ray cluster (`convert --ray`)."""

    model_config = ConfigDict(extra="forbid")

    address: str | None = None              # auto, local, ray://head:10001, host:6379
    engine_actors: int | None = Field(None, ge=1)
    gpus_per_actor: float | None = Field(None, ge=0)
    cpus_per_actor: float | None = Field(None, ge=0)
    batch_size: int | None = Field(None, ge=1)  # pages a batch to an engine actor (default 64 vllm, else 8)
    pages_per_task: int = Field(4, ge=1)
    task_retries: int = Field(3, ge=0)
    storage_options: dict[str, Any] = Field(default_factory=dict)  # fsspec options for a URL output
    progress: bool = True
    init: dict[str, Any] = Field(default_factory=dict)  # extra ray.init arguments


class ConvertOptions(BaseModel):
    """Everything that changes what a conversion does or writes."""

    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True)

    engine: str | None = None                # lite, openai, hf, vllm (None: by the rule)
    model: str | Profile | None = None       # profile name or file (None: Settings.model)
    output: str | None = None                # folder (or, with Ray, an fsspec URL); None: nothing written
    pages: str | list[int] | None = None     # "1-5,9" or 0-based indices; None: every page
    password: str | None = None
    force: bool = False                      # redo documents whose output is complete
    fallback: bool | None = None             # rescue failed pages with lite (None: Settings.fallback)
    keep_headers_footers: bool | None = None
    figures: bool = True                     # crop figures into images/
    paginate: bool = False                   # Markdown: `{N}` + 48 dashes before each page but the first
    keep_raw: bool = False                   # keep the model's raw answer in the JSON
    formats: tuple[Format, ...] = DEFAULT_FORMATS
    concurrency: int | None = Field(None, ge=1)     # pages in flight to the engine
    render_workers: int | None = Field(None, ge=0)
    prefetch_pages: int | None = Field(None, ge=0)
    # engine options (see ENGINE_FIELDS); anything else an engine takes goes in engine_options
    server: str | None = None
    api_key: str | None = None
    served_model: str | None = None
    checkpoint: str | None = None
    device: str | None = None
    batch_size: int | None = Field(None, ge=1)
    max_tokens: int | None = Field(None, ge=1)
    max_retries: int | None = Field(None, ge=0)     # retries of a page whose answer loops (None: the profile's, 6)
    ignore_eos: bool = False
    static_cache: bool = False
    engine_options: dict[str, Any] = Field(default_factory=dict)
    ray: RayOptions | None = None

    @field_validator("output", mode="before")
    @classmethod
    def _path_to_str(cls, v: Any) -> Any:
        return str(v) if isinstance(v, Path) else v

    @field_validator("formats", mode="before")
    @classmethod
    def _formats(cls, v: Any) -> Any:
        return parse_formats(v or None)  # canonical order; json always (its file marks a document complete)

    @classmethod
    def build(cls, **values: Any) -> "ConvertOptions":
        """ConvertOptions from keyword arguments; unknown or bad options -> OptionsError naming them."""
        if "output_dir" in values:
            values["output"] = values.pop("output_dir")
        try:
            return cls(**values)
        except ValidationError as e:
            raise OptionsError(_describe(e)) from None

    @classmethod
    def of(cls, options: "ConvertOptions | None", engine: Any = None, **values: Any) -> "ConvertOptions":
        """`options` with keyword options on top (a scheduler's entry point takes either); an engine
        given by name is the `engine` option, an Engine object or factory is the caller's business."""
        if isinstance(engine, str):
            values["engine"] = engine
        if options is None:
            return cls.build(**values)
        if values:
            return cls.build(**{**options.model_dump(exclude_defaults=True), **values})
        return options

    def resolve(self, settings: Settings | None = None) -> "ConvertOptions":
        """A copy with every default taken from Settings, and the engine chosen."""
        s = settings or get_settings()
        server = self.server or s.server
        return self.model_copy(update={
            "engine": engine_for(self.engine or s.engine, server),
            "model": self.model or s.model,
            "fallback": s.fallback if self.fallback is None else self.fallback,
            "keep_headers_footers": s.keep_headers_footers if self.keep_headers_footers is None
            else self.keep_headers_footers,
            "render_workers": self.render_workers if self.render_workers is not None else s.render_workers,
            "prefetch_pages": self.prefetch_pages if self.prefetch_pages is not None else s.prefetch_pages,
        })

    def engine_kwargs(self) -> dict[str, Any]:
        """The options handed to create_engine: the engine fields that were set, then engine_options."""
        out: dict[str, Any] = {}
        for k in ENGINE_FIELDS:
            v = getattr(self, k)
            if v is not None and v is not False:
                out[k] = v
        if self.concurrency:
            out["concurrency"] = self.concurrency
        out.update(self.engine_options)
        return out


def _describe(e: ValidationError) -> str:
    parts = []
    for err in e.errors():
        where = ".".join(str(x) for x in err.get("loc", ())) or "options"
        if err.get("type") == "extra_forbidden":
            parts.append(f"unknown option {where!r}")
        else:
            msg = str(err.get("msg", "")).removeprefix("Value error, ")
            parts.append(f"option {where!r}: {msg}")
    return "; ".join(parts)
