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

from ocrserve.labels import CHANDRA1_ATTRS, CHANDRA1_LABELS, CHANDRA1_TAGS, CHANDRA2_LABELS  # noqa: F401


class Sampling(BaseModel):
    """Sampling parameters sent with a request."""

    temperature: float = 0.0
    top_p: float = 0.1
    max_tokens: int = 12384


class Profile(BaseModel):
    """What the pipeline knows about one model."""

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
    # page images: PDFs at max(pdf_dpi, shorter side min_short_side); small images upscaled to
    # min_image_side; anything above max_pixels of area scaled down; sides on the patch grid.
    pdf_dpi: float = 192.0
    min_short_side: int = 1024
    min_image_side: int = 1536
    max_pixels: int = 3072 * 2048
    patch_multiple: int = Field(32, description="patch size x spatial merge: image sides are multiples of this")
    sampling: Sampling = Field(default_factory=Sampling)
    retry_sampling: Sampling = Field(default_factory=lambda: Sampling(temperature=0.3, top_p=0.95))
    max_retries: int = 6
    # architecture figures for memory planning and FLOPs estimates (decoder + vision tower)
    params_b: float = 8.8
    decoder_layers: int = 36
    hidden_size: int = 4096
    num_kv_heads: int = 8
    head_dim: int = 128
    vision_params_b: float = 0.6

    @property
    def prompt(self) -> str:
        return _read_prompt(self.prompt_file, tuple(sorted(self.prompt_vars.items())))

    def image_tokens(self, width: int, height: int) -> int:
        """Visual tokens the model spends on an image of this size (after the patch merge)."""
        return max(1, (width // self.patch_multiple) * (height // self.patch_multiple))


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
    ),
    "chandra-2": Profile(
        name="chandra-2",
        checkpoint="datalab-to/chandra-ocr-2",
        architecture="qwen3_5",
        prompt_file="chandra2_ocr_layout_prompt.txt",
        bbox_scale=1000,
        bbox_format="space",
        labels=list(CHANDRA2_LABELS),
        allowed_tags=CHANDRA1_TAGS + ["chem"],
        allowed_attrs=CHANDRA1_ATTRS + ["data-bbox", "data-label"],
        params_b=4.5,
        decoder_layers=32,
        hidden_size=2560,
        num_kv_heads=4,
        head_dim=256,
        vision_params_b=0.4,
    ),
}


def load_profile(name_or_path: str | Profile | None = None) -> Profile:
    """A profile by name (`chandra-1`, `chandra-2`) or from a TOML/JSON file describing one."""
    if isinstance(name_or_path, Profile):
        return name_or_path
    if name_or_path is None:
        name_or_path = "chandra-1"
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
