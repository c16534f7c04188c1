"""The one settings object. Every knob reads from the environment with the OCRSERVE_ prefix."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from pydantic import Field, field_validator
from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from ocrserve.configfile import config_path, top_level


def user_data_dir() -> Path:
    """The user's data folder for ocrserve: $XDG_DATA_HOME/ocrserve, else ~/.local/share/ocrserve (the
    XDG rule, which platformdirs follows on Linux; on Windows %LOCALAPPDATA%/ocrserve)."""
    if os.name == "nt" and os.environ.get("LOCALAPPDATA"):
        return Path(os.environ["LOCALAPPDATA"]) / "ocrserve"
    xdg = os.environ.get("XDG_DATA_HOME", "").strip()
    base = Path(xdg) if xdg and Path(xdg).is_absolute() else Path.home() / ".local" / "share"
    return base / "ocrserve"


class ConfigFileSource(PydanticBaseSettingsSource):
    """The top-level keys of the config file OCRSERVE_CONFIG names (configfile.py), below the environment."""

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        return None, field_name, False  # __call__ reads the file as a whole

    def __call__(self) -> dict[str, Any]:
        path = config_path()
        return top_level(path, self.settings_cls.model_fields) if path else {}


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="OCRSERVE_", extra="ignore")

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        # keyword arguments > OCRSERVE_* > the config file's top-level keys > the defaults below
        return init_settings, env_settings, dotenv_settings, ConfigFileSource(settings_cls), file_secret_settings

    # The defaults of convert options: each is declared once on ConvertOptions (pipeline/options.py, its help,
    # type and CLI flag) and filled from here by ConvertOptions.resolve(); a test checks name, type and bounds.
    # convert --model: a profile name or file (chandra-2, chandra-1, path/to/profile.toml); unset: the model a
    # server serves (its /v1/models card), else chandra-2, upstream's default
    model: str | None = None
    # convert --engine (unset: openai with a server, else lite)
    engine: str | None = None
    # convert --server: base URL of an OpenAI-compatible server, e.g. http://localhost:8000/v1
    server: str | None = None
    # convert --api-key: API key for that server
    api_key: str | None = None
    # convert --served-model: the server's name of the model (default: ask the server's /v1/models)
    served_model: str | None = None
    # convert --concurrency: requests in flight to the server (vLLM batches them; unset or 0: 128)
    concurrency: int | None = Field(None, ge=1)
    # rendered pages allowed to wait ahead of the requests (memory bound)
    prefetch_pages: int = Field(64, ge=0)
    # convert --render-workers: worker processes rendering PDF pages (0 = the CPUs it may use, at most 8)
    render_workers: int = Field(0, ge=0)
    # how worker processes start: fork (Linux default), spawn or forkserver
    mp_start: str | None = None
    # seconds a render worker may spend on one task (open, render a page) before it is killed and the
    # document fails with a timeout; 0 = no limit
    render_timeout_s: float = Field(120.0, ge=0)
    # seconds LibreOffice may spend converting one Office file (DOCX, XLSX, ...) to PDF (a batch: this per
    # file); in a render worker at most 90% of render_timeout_s; 0 = 120
    office_timeout_s: float = Field(120.0, ge=0)
    # LibreOffice may reach the network (remote images, styles, linked files an HTML or Office file names):
    # off by default, so that a document cannot make this machine fetch URLs (SSRF: internal services)
    office_network: bool = False
    # how the render child of a Ray worker starts: forkserver (default where available) or spawn
    ray_child_start: str | None = None
    # the vllm executable `ocrserve serve` starts
    vllm_bin: str = "vllm"
    # worker processes for the lite engine (0 = the CPUs it may use, at most 8)
    lite_workers: int = 0
    # RapidOCR loaded when a lite worker starts (true) or on the first page that needs OCR (false); unset:
    # the long-lived services (API, MCP) load it at start, a conversion when a page needs it (a text-layer
    # document never loads it)
    lite_warm: bool | None = None
    # seconds a request to the server may take in all (its deadline, streamed or not); unset: enough for
    # the request's token limit at 8 tokens/s (60 + max_tokens / 8, at least 600; 1,608 s at 12,384)
    request_timeout: float | None = None
    # give up on a page after this many failed requests (connection errors, 5xx, deadlines, oversized answers)
    max_connection_retries: int = 5
    # convert --no-fallback sets it false: hand pages the model cannot read to the lite engine
    fallback: bool = True
    # convert --keep-headers-footers: keep Page-Header / Page-Footer blocks in Markdown
    keep_headers_footers: bool = False
    # largest image (pixels) that is opened at all; larger ones are refused as decompression bombs
    max_image_pixels: int = 200_000_000
    # API: comma-separated API keys (empty: the API is open)
    api_keys: str = ""
    # API: file with one API key a line
    api_keys_file: Path | None = None
    # API: data folder for jobs (SQLite and files); default: the user's data folder,
    # $XDG_DATA_HOME/ocrserve (~/.local/share/ocrserve), never the working directory
    data_dir: Path = Field(default_factory=lambda: user_data_dir())
    # API: largest upload in bytes
    max_upload_bytes: int = 100 * 1024 * 1024
    # API: most pages in one upload
    max_pages: int = 2000
    # API: requests a key may have running at once
    per_key_concurrency: int = 4
    # API: unfinished jobs (queued or running) a key may have; more are refused with 429
    per_key_jobs: int = 1000
    # API: bytes of uploads a key may have in unfinished jobs (queued or running); a job past it is refused
    # with 429 (a single upload over it with 413); 0 = no limit
    per_key_job_bytes: int = Field(2 * 1024**3, ge=0)
    # API: unfinished jobs in the whole service; more are refused with 429 (backpressure)
    max_queued_jobs: int = 10000
    # API: jobs converted at once by the job worker (pages still share the engine's capacity)
    job_workers: int = 2
    # API: seconds finished (done/failed) jobs are kept, result and row; then removed (0 = keep forever)
    job_ttl_s: float = 7 * 24 * 3600
    # API: seconds between sweeps that remove expired jobs (one also runs at startup)
    job_sweep_interval_s: float = 600.0
    # API: seconds a client is told to wait (Retry-After) when refused with 429
    retry_after_s: int = 2
    # API: bytes of page images kept in memory for the viewer (GET /v1/pages/{token}.png); the oldest go
    # first past this (a page image is 10 KB to a few MB); 0 = keep none (streamed pages have no image)
    api_page_cache_bytes: int = Field(128 * 1024 * 1024, ge=0)
    # API: seconds a connection may take to send a whole request head (after it opened or after its last
    # answer) before it is closed; uvicorn has no such limit of its own; 0 = no limit
    api_header_timeout_s: float = Field(10.0, ge=0)
    # API: seconds an upload's body may take to arrive; then 408 (it is read before a concurrency slot is
    # taken, so a slow or bodiless upload holds only its connection); 0 = no limit
    api_body_timeout_s: float = Field(120.0, ge=0)
    # API: open connections (and requests) served at once; more are answered 503 by uvicorn; 0 = no cap
    api_max_connections: int = Field(1000, ge=0)
    # API: bytes of Server-Sent Events a streamed conversion may have waiting for a client that does not
    # read them; past it the client is dropped (its conversion stops, the connection is closed)
    api_stream_buffer_bytes: int = Field(8 * 1024 * 1024, ge=1)
    # API: comma-separated origins allowed by CORS (e.g. https://app.example.com, or *); empty = no CORS
    # headers (browsers allow only same-origin pages, like the viewer)
    cors_origins: str = ""

    @field_validator(
        "api_keys_file", "server", "api_key", "served_model", "engine", "mp_start", "ray_child_start", mode="before"
    )
    @classmethod
    def _empty_is_unset(cls, v):
        # OCRSERVE_API_KEYS_FILE= (set but empty) means "no file", not the current folder
        return None if isinstance(v, str) and not v.strip() else v

    def for_service(self) -> Settings:
        """These settings for a long-lived service (API, MCP): RapidOCR loaded when its lite workers start,
        unless lite_warm says otherwise."""
        return self if self.lite_warm is not None else self.model_copy(update={"lite_warm": True})

    @field_validator("concurrency", mode="before")
    @classmethod
    def _zero_is_unset(cls, v):
        # OCRSERVE_CONCURRENCY=0 (or set but empty) keeps its old meaning: derive it (128 for a server)
        return None if v in (0, "0") or (isinstance(v, str) and not v.strip()) else v


def get_settings(**overrides) -> Settings:
    return Settings(**{k: v for k, v in overrides.items() if v is not None})
