"""What a serving sweep runs (`ocrserve bench sweep`): its spec, the configurations and the load.

A spec (JSON, bench/sweeps/) names the load and the configurations; `defaults` apply to each:
`{"pages": 256, "max_tokens": 1024, "defaults": {"memory": "lean"}, "configs": [{"name": "lean"},
{"name": "renderer-8", "vllm_args": ["--renderer-num-workers", "8"]}]}`. `sweep_spec` reads the
command's options (a spec file, `--scaling`, `--only`, ...); `scaling_configs(n)`: dp replicas 1, 2,
..., n and the encoder/decoder split (`--parallel epd`) on the same n GPUs.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field


class SweepConfig(BaseModel):
    """One serving configuration: `ocrserve serve` options plus raw `vllm serve` flags."""

    model_config = {"extra": "forbid"}

    name: str = Field(pattern=r"^[A-Za-z0-9._-]+$")
    model: str | None = Field(None, description="model folder ($VARS expanded); default: the sweep's --model")
    tokenizer_from: str | None = Field(
        None, description="folder whose tokenizer files complete a configs-only model folder"
    )
    profile: str = "chandra-2"
    memory: Literal["lean", "max"] = "lean"
    quantization: Literal["fp8", "none"] = "none"
    concurrency: int = Field(128, ge=1, description="pages a replica is sized for (ocrserve serve --concurrency)")
    client_concurrency: int | None = Field(
        None, ge=1, description="requests in flight per endpoint (default: concurrency)"
    )
    max_num_batched_tokens: int | None = Field(None, ge=256)
    gpus: str = "0"
    parallel: Literal["dp", "tp", "epd"] = "dp"
    epd_encoders: int = 1
    serve_args: list[str] = Field(default_factory=list, description="more `ocrserve serve` flags")
    vllm_args: list[str] = Field(default_factory=list, description="`vllm serve` flags (after --; they win)")
    env: dict[str, str] = Field(
        default_factory=dict,
        description="environment of this configuration's server (e.g. OMP_NUM_THREADS), over the sweep's",
    )
    prefill_probe: bool = Field(False, description="also measure max_tokens 1 (vision + prefill alone)")
    latency_probe: bool = Field(
        False,
        description="first: time to first token and to a first block on the idle server, split (bench/latency.py)",
    )
    curve: list[int] = Field(
        default_factory=list, description="more loads on the same server at these requests in flight per endpoint"
    )
    curve_waves: int = Field(4, ge=1, description="a curve point's pages: this many times its requests in flight")
    load: bool = Field(True, description="the pre-encoded load on the standard pages (off: only bench_modes)")
    bench_modes: list[Literal["pipeline", "plain", "ceiling", "stages"]] = Field(
        default_factory=list, description="`ocrserve bench` modes run against this server, side by side"
    )
    bench_pages: int = Field(200, ge=1, description="distinct synthetic PDF pages of the bench modes")
    stage_pages: int = Field(10, ge=1, description="pages of the one-at-a-time client CPU split (`stages`)")
    plain_pages: int | None = Field(None, ge=1, description="the bench's plain mode on only the first N of bench_pages")
    pages: int | None = Field(None, ge=1, description="pages of this configuration's load (default: the spec's)")
    note: str = ""


class SweepSpec(BaseModel):
    model_config = {"extra": "forbid"}

    pages: int = Field(256, ge=1)
    max_tokens: int = Field(1024, ge=1)
    prefill_pages: int = Field(128, ge=1)
    seed: int = 0
    defaults: dict[str, Any] = Field(default_factory=dict)
    configs: list[SweepConfig]


def load_spec(path: Path | str) -> SweepSpec:
    """A sweep spec from a JSON file; `defaults` are merged into every configuration."""
    p = Path(path)
    try:
        raw = json.loads(p.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as e:
        raise ValueError(f"sweep spec {p} cannot be read: {e}") from e
    if not isinstance(raw, dict) or not isinstance(raw.get("configs"), list) or not raw["configs"]:
        raise ValueError(f'sweep spec {p}: needs a non-empty "configs" list')
    defaults = raw.get("defaults") or {}
    raw["configs"] = [{**defaults, **c} for c in raw["configs"]]
    spec = SweepSpec.model_validate(raw)
    names = [c.name for c in spec.configs]
    if len(set(names)) != len(names):
        raise ValueError(f"sweep spec {p}: configuration names repeat: {names}")
    return spec


def scaling_configs(n_gpus: int, base: SweepConfig | None = None) -> list[SweepConfig]:
    """Data-parallel replicas 1, 2, 4, ..., n and the encoder/decoder split over n GPUs, from one base config."""
    if n_gpus < 1:
        raise ValueError(f"scaling needs at least 1 GPU, got {n_gpus}")
    base = base or SweepConfig(name="base")
    counts = sorted({1, n_gpus, *[k for k in (2, 4, 8) if k < n_gpus]})
    out = [
        base.model_copy(update={"name": f"dp-{k}", "gpus": ",".join(map(str, range(k))), "parallel": "dp"})
        for k in counts
    ]
    if n_gpus >= 2:
        enc = max(1, n_gpus // 4)
        per = base.client_concurrency or base.concurrency
        out.append(
            base.model_copy(
                update={
                    "name": f"epd-{enc}e{n_gpus - enc}d",
                    "gpus": ",".join(map(str, range(n_gpus))),
                    "parallel": "epd",
                    "epd_encoders": enc,
                    "client_concurrency": per * (n_gpus - enc),
                }
            )
        )
    return out


def sweep_spec(
    path: Path | str | None,
    *,
    scaling: int | None = None,
    only: str | None = None,
    pages: int | None = None,
    max_tokens: int | None = None,
) -> SweepSpec:
    """The spec `ocrserve bench sweep` runs: a spec file and/or `scaling` (on the spec's first config, else a
    Chandra 1 base), `only` these comma-separated config names, `pages` and `max_tokens` overriding the spec's."""
    if path:
        spec = load_spec(path)
    elif scaling:
        spec = SweepSpec(configs=[SweepConfig(name="base", profile="chandra-1")])  # the model: $CHANDRA1_SHAPE
    else:
        raise ValueError("give --spec or --scaling")
    if scaling:
        spec = spec.model_copy(update={"configs": scaling_configs(scaling, spec.configs[0])})
    if only:
        wanted = [n.strip() for n in only.split(",") if n.strip()]
        unknown = [n for n in wanted if n not in {c.name for c in spec.configs}]
        if unknown:
            raise ValueError(f"--only names configs the spec lacks: {unknown}")
        spec = spec.model_copy(update={"configs": [c for c in spec.configs if c.name in wanted]})
    return spec.model_copy(update={k: v for k, v in (("pages", pages), ("max_tokens", max_tokens)) if v})
