"""Model profiles: everything the pipeline needs to know about a model that speaks Chandra's format.

A profile names the checkpoint, the prompt (package data, sent byte for byte), how boxes are written
(scale and format), the labels, the page-image pixel budget on the model's patch grid, and sampling.
`chandra-1` and `chandra-2` ship; any other model that answers in the same HTML layout-block form
can be described by a TOML or JSON file and loaded with `load_profile(path)`.
"""

from __future__ import annotations

import json
import tomllib
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field

from ocrserve.imagesize import Budget, server_size
from ocrserve.labels import CHANDRA1_ATTRS, CHANDRA1_LABELS, CHANDRA1_TAGS, CHANDRA2_LABELS


class Sampling(BaseModel):
    """Sampling parameters sent with a request."""

    temperature: float = 0.0
    top_p: float = 0.1
    max_tokens: int = 12384


class Figures(BaseModel):
    """A model's architecture figures, for memory planning and FLOPs estimates (decoder + vision tower): a
    profile's (Chandra 1's by default), and the start of vllm/shape.py's ModelShape."""

    params_b: float = Field(8.8, gt=0, description="all parameters, billions (decoder + vision)")
    vision_params_b: float = Field(0.6, ge=0)
    decoder_layers: int = Field(36, gt=0)
    hidden_size: int = Field(4096, gt=0)
    num_kv_heads: int = Field(8, gt=0)
    head_dim: int = Field(128, gt=0)


class Profile(Figures):
    """What the pipeline knows about one model (its architecture figures: Figures')."""

    name: str
    checkpoint: str = Field(description="Hugging Face Hub id or local folder of the weights")
    architecture: str = Field("qwen3_vl", description="transformers model_type")
    prompt_file: str = Field(description="file under ocrserve/prompts, or an absolute path")
    prompt_vars: dict[str, str] = Field(default_factory=dict, description="{name} placeholders filled in the prompt")
    bbox_scale: int = 1024
    bbox_format: Literal["list", "space"] = "list"
    labels: list[str] = Field(default_factory=lambda: list(CHANDRA1_LABELS))
    allowed_tags: list[str] = Field(default_factory=lambda: list(CHANDRA1_TAGS))
    allowed_attrs: list[str] = Field(default_factory=lambda: list(CHANDRA1_ATTRS))
    # page images, as Chandra's own client makes them (imagesize.py): PDFs rendered at max(pdf_dpi,
    # shorter side min_short_side); images with either side under min_image_side upscaled so the shorter
    # side is min_image_side; then fitted within [min_pixels, max_pixels] of area, on client_grid when
    # set (Chandra 2: 28). The server's processor snaps to patch_multiple within its own pixel bounds.
    pdf_dpi: float = 192.0
    min_short_side: int = 1024
    min_image_side: int = 1536
    max_pixels: int = 3072 * 2048
    min_pixels: int = 28 * 28
    client_grid: int | None = Field(None, description="the client puts image sides on this grid (Chandra 2: 28)")
    patch_multiple: int = Field(32, description="patch size x spatial merge: the server's image grid")
    server_min_pixels: int = Field(56 * 56, description="the server processor's lower pixel bound")
    server_max_pixels: int = Field(3072 * 2048, description="the server processor's upper pixel bound")
    server_pixel_bounds: bool = Field(
        False,
        description="the model's launcher gives vLLM's processor server_min_pixels and server_max_pixels "
        "(--mm-processor-kwargs); otherwise ocrserve gives it max_pixels",
    )
    sampling: Sampling = Field(default_factory=Sampling)
    retry_sampling: Sampling = Field(default_factory=lambda: Sampling(temperature=0.3, top_p=0.95))
    retry_temperature_step: float = Field(
        0.0, description="retry n (from 1) samples at min(step * n, retry_temperature_max); 0: retry_sampling's"
    )
    retry_temperature_max: float = 0.8
    max_retries: int = 6
    # flags `ocrserve serve` gives `vllm serve` for this model, as the model's own launcher does (flags
    # after `--` still win); a --mm-processor-kwargs here replaces ocrserve's own
    server_args: list[str] = Field(default_factory=list)

    @property
    def prompt(self) -> str:
        return _read_prompt(self.prompt_file, tuple(sorted(self.prompt_vars.items())))

    def image_tokens(self, width: int, height: int) -> int:
        """Visual tokens the model spends on an image of this size (after the server's resize and the patch merge)."""
        w, h = server_size(width, height, Budget.from_profile(self))
        return max(1, (w // self.patch_multiple) * (h // self.patch_multiple))

    def retry_sampling_for(self, retry: int) -> Sampling:
        """The sampling of retry number `retry` (from 1): Chandra 2 raises the temperature with each retry."""
        if not self.retry_temperature_step:
            return self.retry_sampling
        t = min(self.sampling.temperature + self.retry_temperature_step * retry, self.retry_temperature_max)
        return self.retry_sampling.model_copy(update={"temperature": t})  # as upstream computes it, unrounded


@lru_cache(maxsize=32)
def _read_prompt(prompt_file: str, prompt_vars: tuple[tuple[str, str], ...]) -> str:
    p = Path(prompt_file)
    if p.is_absolute():
        text = p.read_text(encoding="utf-8")
    else:
        text = resources.files("ocrserve.prompts").joinpath(prompt_file).read_text(encoding="utf-8")
    for k, v in prompt_vars:
        text = text.replace("{" + k + "}", v)
    return text


PROFILES: dict[str, Profile] = {
    "chandra-1": Profile(
        name="chandra-1",
        checkpoint="datalab-to/chandra",
        architecture="qwen3_vl",
        prompt_file="chandra1_ocr_layout_prompt.txt",
        prompt_vars={"bbox_scale": "1024"},
        bbox_scale=1024,
        bbox_format="list",
        sampling=Sampling(max_tokens=8192),  # chandra-ocr 0.1.8's MAX_OUTPUT_TOKENS (0.2.0 raised it to 12384)
    ),
    "chandra-2": Profile(
        name="chandra-2",
        checkpoint="datalab-to/chandra-ocr-2",
        architecture="qwen3_5",
        prompt_file="chandra2_ocr_layout_prompt.txt",
        bbox_scale=1000,
        bbox_format="space",
        labels=list(CHANDRA2_LABELS),
        min_pixels=1792 * 28,
        client_grid=28,
        server_min_pixels=3136,  # upstream's launcher: --mm-processor-kwargs min_pixels/max_pixels
        server_max_pixels=6291456,
        server_pixel_bounds=True,
        retry_sampling=Sampling(temperature=0.2, top_p=0.95),
        retry_temperature_step=0.2,
        allowed_tags=CHANDRA1_TAGS + ["chem"],
        allowed_attrs=CHANDRA1_ATTRS + ["data-bbox", "data-label"],
        params_b=4.5,
        decoder_layers=32,
        hidden_size=2560,
        num_kv_heads=4,
        head_dim=256,
        vision_params_b=0.4,
        # what chandra-ocr 0.2.0's launcher (chandra/scripts/vllm.py) passes that can change the output
        # (and the processor's pixel bounds above: server_pixel_bounds)
        server_args=["--dtype", "bfloat16"],
    ),
}


def load_profile(name_or_path: str | Profile | None = None) -> Profile:
    """A profile by name (`chandra-1`, `chandra-2`) or from a TOML/JSON file describing one; None: chandra-2."""
    if isinstance(name_or_path, Profile):
        return name_or_path
    if name_or_path is None:
        name_or_path = "chandra-2"  # upstream's default (chandra-ocr 0.2.0)
    if name_or_path in PROFILES:
        return PROFILES[name_or_path]
    path = Path(name_or_path)
    if path.suffix.lower() in {".toml", ".json"}:
        if not path.is_file():
            raise ValueError(f"profile file {path} does not exist")
        raw = path.read_bytes()
        data = tomllib.loads(raw.decode()) if path.suffix.lower() == ".toml" else json.loads(raw)
        base = PROFILES.get(data.pop("base", ""), None)
        merged = {**(base.model_dump() if base else {}), **data}
        pf = merged.get("prompt_file")
        if pf and not Path(pf).is_absolute() and (path.parent / pf).is_file():
            merged["prompt_file"] = str((path.parent / pf).resolve())
        return Profile.model_validate(merged)
    raise ValueError(
        f"unknown model profile {name_or_path!r}: use one of {sorted(PROFILES)} or a .toml/.json profile file"
    )


def served_profile(card: dict, read_config: bool = True) -> Profile | None:
    """The built-in profile of the model a server lists (a /v1/models card: its `root`, the checkpoint vLLM
    loaded, and its `id`), or None when it is none of them. A Hub id or a folder named like a profile's
    checkpoint matches; a local folder (the server on this machine) also by its config.json model_type."""
    root, name = str(card.get("root") or ""), str(card.get("id") or "")
    tail = root.rstrip("/").rsplit("/", 1)[-1].lower() if "/" in root else ""  # a Hub id or a folder
    for prof in PROFILES.values():  # the served name only as a full Hub id: upstream serves either as "chandra"
        if prof.checkpoint in (root, name) or (tail and tail == prof.checkpoint.rsplit("/", 1)[-1].lower()):
            return prof
    refs = [root, name]
    if read_config:
        for ref in refs:
            cfg = Path(ref) / "config.json" if ref.startswith("/") else None
            try:
                model_type = json.loads(cfg.read_text(encoding="utf-8")).get("model_type") if cfg else None
            except (OSError, ValueError, AttributeError):
                model_type = None
            for prof in PROFILES.values():
                if model_type and model_type == prof.architecture:
                    return prof
    return None
