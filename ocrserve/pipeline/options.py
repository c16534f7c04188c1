"""The options of a conversion, typed once for the CLI, the Python API, the local and the Ray scheduler.

Each option is declared once, on its field (`option()`: help, type, default, CLI flags, whether a
Settings knob backs it); the `convert` command is built from these declarations (cli/declared.py).
`ConvertOptions` holds what the user chose (None = not chosen); `resolve(settings)` fills every
default from Settings in this one place, and picks the engine by the one rule (engines.engine_for:
openai when a server is given, else lite). Unknown options are an error naming them.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from ocrserve.engines import ENGINE_NAMES, engine_class, engine_for, option_names
from ocrserve.engines.base import PIPELINE_OPTIONS, engine_options
from ocrserve.errors import OcrserveError
from ocrserve.export.formats import default_formats, formats_help, parse_formats
from ocrserve.profiles import PROFILES, Profile
from ocrserve.settings import Settings, get_settings


def engine_fields() -> tuple[str, ...]:
    """The options that go to the engine as they are: the ConvertOptions fields that some registered
    engine's Options model declares (their union; each engine takes its own, create_engine checks them)."""
    taken = option_names()
    return tuple(k for k in ConvertOptions.model_fields if k in taken)


class OptionsError(OcrserveError, ValueError):
    """Conversion options that do not fit (an unknown option, a bad value)."""


def option(
    default: Any = None,
    help: str = "",
    *,
    cli: tuple[str, ...] = (),
    env: bool = False,
    cli_help: str | None = None,
    cli_default: Any = None,
    metavar: str | None = None,
    **field: Any,
) -> Any:
    """A field of ConvertOptions with its one declaration: `help` (what the CLI shows), `cli` its flags
    (long, then short; none: the Python API only), `env`: Settings (OCRSERVE_<NAME>) gives its default
    when it is not chosen (the field's default is then None, and Settings has a knob of that name and
    type). For the command line only: `cli_help` of a `--no-` flag (it sets False), `cli_default`,
    `metavar`. `field`: pydantic's Field arguments (ge=1, ...). The CLI is built from these
    (ocrserve/cli/declared.py); tests/cli/test_cli_declared_options.py checks Settings and the README."""
    extra: dict[str, Any] = {"cli": list(cli), "env": env}
    extra.update(
        {k: v for k, v in (("cli_help", cli_help), ("cli_default", cli_default), ("metavar", metavar)) if v is not None}
    )
    return Field(default, description=help, json_schema_extra=extra, **field)


@dataclass(frozen=True)
class OptionSpec:
    """One option as declared on its field (see option())."""

    name: str
    annotation: Any
    help: str
    flags: tuple[str, ...] = ()
    env: bool = False
    cli_help: str | None = None
    cli_default: Any = None
    metavar: str | None = None


class RayOptions(BaseModel):
    """How a run is spread over a Ray cluster (`convert --ray`)."""

    model_config = ConfigDict(extra="forbid")

    address: str | None = None  # auto, local, ray://head:10001, host:6379
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

    # each option declared once (see option()); None: not chosen (env=True: Settings decides in resolve())
    output: str | None = option(  # None: nothing written (the Python API returns the Documents)
        None, "output folder (with --ray also an fsspec URL)", cli=("--output", "-o"), cli_default="ocrserve-out"
    )
    engine: str | None = option(
        None, f"{', '.join(ENGINE_NAMES)} (default: openai with a server, else lite)", cli=("--engine", "-e"), env=True
    )
    model: str | Profile | None = option(
        None,
        f"model profile: {', '.join(PROFILES)} or a profile file (default: what --server serves, else chandra-2)",
        cli=("--model", "-m"),
        env=True,
    )
    pages: str | list[int] | None = option(  # or a list of 0-based page indices; None: every page
        None, "page ranges, e.g. 1-5,9 (1-based)", cli=("--pages",)
    )
    password: str | None = option(None, "password for encrypted PDFs", cli=("--password",))
    force: bool = option(False, "redo documents that are already complete", cli=("--force",))
    fallback: bool | None = option(
        None,
        "rescue failed pages with the lite engine (else they are marked failed)",
        cli=("--no-fallback",),
        cli_help="do not rescue failed pages with the lite engine",
        env=True,
    )
    keep_headers_footers: bool | None = option(
        None, "keep page headers/footers in Markdown", cli=("--keep-headers-footers",), env=True
    )
    figures: bool = option(
        True,
        "crop figures into images/ and link them from the Markdown",
        cli=("--no-images",),
        cli_help="no figure crops (images/ stays empty) and no image lines in the Markdown; a figure keeps its "
        "description as text",
    )
    paginate: bool = option(
        False,
        "page separators in the Markdown: before each page but the first, a line with its 0-based page "
        "index in braces and 48 dashes (as chandra's --paginate_output)",
        cli=("--paginate",),
    )
    keep_raw: bool = option(False, "keep the model's raw answer in the JSON")
    formats: tuple[str, ...] = Field(  # registered names (export/formats.py)
        default_factory=default_formats,
        json_schema_extra={"cli": ["--format"]},
        description=f"output files, repeatable or a comma list: {formats_help()}; default "
        f"{','.join(default_formats())}. json is always written: it marks a document complete",
    )
    concurrency: int | None = option(
        None,
        "pages in flight to the engine (default: 128 for a server, keeps a vLLM batch full)",
        cli=("--concurrency", "-c"),
        env=True,
        ge=1,
    )
    render_workers: int | None = option(
        None, "page-rendering processes (0: the CPUs it may use, at most 8)", cli=("--render-workers",), env=True, ge=0
    )
    prefetch_pages: int | None = option(
        None, "rendered pages allowed to wait ahead of the engine (a memory bound)", env=True, ge=0
    )
    # engine options (see engine_fields()); anything else an engine takes goes in engine_options
    server: str | None = option(
        None, "OpenAI-compatible server URL (vLLM), implies --engine openai", cli=("--server",), env=True
    )
    api_key: str | None = option(None, "API key for the server", cli=("--api-key",), env=True)
    served_model: str | None = option(
        None, "model name on the server (default: asked)", cli=("--served-model",), env=True
    )
    checkpoint: str | None = option(None, "hf engine: Hub id or folder (default: the profile's)", cli=("--checkpoint",))
    device: str | None = option(None, "hf engine: cuda, mps or cpu", cli=("--device",))
    batch_size: int | None = option(None, "hf engine: pages per generate() batch", cli=("--batch-size",), ge=1)
    max_tokens: int | None = option(
        None,
        "output token limit a page (default: the profile's: 12384 chandra-2, 8192 chandra-1); a page that "
        "reaches it is kept and marked truncated",
        cli=("--max-tokens",),
        ge=1,
    )
    max_retries: int | None = option(
        None,
        "retries of a page whose answer loops, at the model's retry sampling (default: the profile's, 6)",
        cli=("--max-retries",),
        ge=0,
    )
    ignore_eos: bool = option(
        False, "benchmarks with weightless models: always generate --max-tokens", cli=("--ignore-eos",)
    )
    static_cache: bool = option(
        False,
        "hf engine: static KV cache, decoding compiled with torch.compile on CUDA (the first batch of each "
        "size compiles for 1-2 minutes; then 1.4-8.6x faster on an H200, bench/results/gpu-h200/hf-engine)",
        cli=("--compile",),
    )
    engine_options: dict[str, Any] = Field(
        default_factory=dict, description="anything else the engine takes, by name (its __init__ keywords)"
    )
    ray: RayOptions | None = option(
        None,
        "run on a Ray cluster: auto (the running cluster), local (a fresh one on this machine) or "
        "ray://head:10001; OUTPUT may then be an fsspec URL (s3://...)",
        cli=("--ray",),
        metavar="ADDRESS",
    )

    @field_validator("output", mode="before")
    @classmethod
    def _path_to_str(cls, v: Any) -> Any:
        return str(v) if isinstance(v, Path) else v

    @field_validator("ray", mode="before")
    @classmethod
    def _ray_address(cls, v: Any) -> Any:
        return {"address": v} if isinstance(v, str) else v  # ray="auto": that cluster, the other Ray options default

    @classmethod
    def declared(cls) -> dict[str, OptionSpec]:
        """Every option as declared on its field (help, flags, env; see option()), in declaration order."""
        out = {}
        for name, f in cls.model_fields.items():
            x = f.json_schema_extra if isinstance(f.json_schema_extra, dict) else {}
            flags = x.get("cli")
            out[name] = OptionSpec(
                name,
                f.annotation,
                f.description or "",
                tuple(map(str, flags)) if isinstance(flags, list) else (),
                bool(x.get("env")),
                _str(x.get("cli_help")),
                x.get("cli_default"),
                _str(x.get("metavar")),
            )
        return out

    @field_validator("formats", mode="before")
    @classmethod
    def _formats(cls, v: Any) -> Any:
        return parse_formats(v or None)  # known now (the registry), canonical order, json always (marks completeness)

    @classmethod
    def build(cls, **values: Any) -> ConvertOptions:
        """ConvertOptions from keyword arguments; unknown or bad options -> OptionsError naming them."""
        if "output_dir" in values:
            values["output"] = values.pop("output_dir")
        try:
            return cls(**values)
        except ValidationError as e:
            raise OptionsError(_describe(e)) from None

    @classmethod
    def of(cls, options: ConvertOptions | None, engine: Any = None, **values: Any) -> ConvertOptions:
        """`options` with keyword options on top (a scheduler's entry point takes either); an engine
        given by name is the `engine` option, an Engine object or factory is the caller's business."""
        if isinstance(engine, str):
            values["engine"] = engine
        if options is None:
            return cls.build(**values)
        if values:
            return cls.build(**{**options.model_dump(exclude_defaults=True), **values})
        return options

    def resolve(self, settings: Settings | None = None) -> ConvertOptions:
        """A copy with every default taken from Settings: each option declared env=True that was not
        chosen takes the Settings knob of its name; then the engine is chosen by the rule."""
        s = settings or get_settings()
        filled = {
            name: getattr(s, name) for name, spec in self.declared().items() if spec.env and _unset(getattr(self, name))
        }
        engine = engine_for(filled.get("engine", self.engine), filled.get("server", self.server))
        resolved = self.model_copy(update={**filled, "engine": engine})
        not_taken = _not_taken(resolved, filled)
        return resolved.model_copy(update=dict.fromkeys(not_taken)) if not_taken else resolved

    def engine_kwargs(self) -> dict[str, Any]:
        """The options handed to create_engine: the engine fields that were set, then engine_options."""
        out: dict[str, Any] = {}
        for k in engine_fields():
            v = getattr(self, k)
            if v is not None and v is not False:
                out[k] = v
        out.update(self.engine_options)
        return out


def _unset(v: Any) -> bool:
    return v is None or (isinstance(v, str) and not v.strip())


def _not_taken(opts: ConvertOptions, filled: dict[str, Any]) -> list[str]:
    """Knobs filled from Settings that would reach an engine that does not take them (OCRSERVE_API_KEY
    with lite): left unset, as options nobody chose (a chosen one is still the engine's error)."""
    handed = [k for k in opts.engine_kwargs() if filled.get(k) is not None and k not in PIPELINE_OPTIONS]
    if not handed:
        return []
    accepted = engine_options(engine_class(str(opts.engine)))
    return [] if accepted is None else [k for k in handed if k not in accepted]


def _str(v: Any) -> str | None:
    return v if isinstance(v, str) else None


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
