"""Builds the `vllm serve` command lines for a layout of GPUs: dp, tp or epd.

- dp (default): one independent `vllm serve` process per GPU (CUDA_VISIBLE_DEVICES=i). On several GPUs
  the router (ocrserve.vllm.router) takes the port asked for and the replicas move to the ports after
  it, on 127.0.0.1: one URL for every GPU, pages to the replica with the fewest outstanding, a dead
  one routed around. Chosen over vLLM's own `--data-parallel-size` because each replica has its own
  API server (the image preprocessing scales with the GPUs) and is its own process group (one that
  dies is restarted alone while the others keep serving; a healthy one is attached to by its port);
  the router's docstring gives the reasons in full. `router=False` (`serve --no-router`): a URL per
  replica, on the ports from the one asked for.
- tp: one process over all GPUs with `--tensor-parallel-size N` (weights and KV heads split).
- epd: encoder/decoder disaggregation. Encoder instances (`--mm-encoder-only`, EC producer) run
  only the vision tower; prefill+decode instances (EC consumer) take the encoder outputs through
  vLLM's encoder-cache transfer (`--ec-transfer-config`, ECExampleConnector over a shared folder;
  ECCPUConnector needs NIXL), and a small proxy (ocrserve.vllm.epd_proxy) sends each page to an
  encoder first and then to a decoder, as vLLM's examples/disaggregated_encoder proxy does.

Flags for OCR pages: one image and no video a prompt, the image processor capped at the profile's
pixel budget (so the profiler and the encoder cache size for 6,144-token pages, not 16,384), max
model length from the page budget, batched tokens and sequences from the plan, and 8 API renderer
threads (`--renderer-num-workers`: with vLLM's default of one, the API server's image preprocessing
capped vision + prefill at 4.9 pages/s on an H200; with 8 the GPU's 6.8 shows, same memory:
bench/results/gpu-h200/sweep-2026-12-03c). The processor's pixel bounds are the profile's own where its
launcher passes them (`server_pixel_bounds`; Chandra 2, as chandra-ocr 0.2.0's chandra/scripts/vllm.py:
`--mm-processor-kwargs {"min_pixels":3136,"max_pixels":6291456}`). Then the profile's `server_args`: what
the model's own launcher passes that can change the output (Chandra 2: `--dtype bfloat16`; a
--mm-processor-kwargs there replaces ocrserve's own). Unknown flags pass through after `--` and win over ours (the last occurrence of a
flag is the one vLLM keeps).

Against that launcher, for Chandra 2: matched are bf16 (no --quantization unless asked), the
processor's pixel bounds, `--served-model-name chandra`, prefix caching on, CUDA graphs on
(--no-enforce-eager), no --chat-template (the checkpoint's own) and no speculative decoding (its
--mtp is off by default). Not matched: its docker image (vllm/vllm-openai:v0.17.0; here the vLLM
installed), and the sizes it scales by GPU type (--max-num-seqs 64, --max-num-batched-tokens 8192,
--gpu-memory-utilization 0.85 on an H100), which here come from the memory plan and change no answer;
and its --max-model-len 18000, which can leave the largest pages (up to 6,144 image tokens) a little
less than the 12,384-token output budget, where the plan's longest sequence fits every page's image,
prompt and full budget.
"""

from __future__ import annotations

import json
import os
import shlex
import sys
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field

from ocrserve.profiles import Profile
from ocrserve.vllm.plan import ServePlan

Parallel = Literal["dp", "tp", "epd"]


class ProcessSpec(BaseModel):
    """One child process to run: a vLLM server or the EPD proxy."""

    name: str
    role: Literal["replica", "encoder", "decoder", "proxy", "router"]
    argv: list[str]
    env: dict[str, str] = Field(default_factory=dict)
    host: str = "127.0.0.1"
    port: int
    gpus: list[int] = Field(default_factory=list)

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def shell(self) -> str:
        env = " ".join(f"{k}={shlex.quote(v)}" for k, v in self.env.items())
        return (env + " " if env else "") + shlex.join(self.argv)


class Layout(BaseModel):
    """All processes of a serve, and the URLs that clients send pages to."""

    parallel: Parallel
    processes: list[ProcessSpec]
    endpoints: list[str] = Field(description="OpenAI-compatible base URLs (…/v1) that take pages")


class ServeOptions(BaseModel):
    """What the command line decided, beyond the memory plan."""

    model: str = Field(description="checkpoint id or local folder passed to vllm serve")
    served_model_name: str = "chandra"
    gpus: list[int] = Field(default_factory=lambda: [0])
    parallel: Parallel = "dp"
    dp_backend: Literal["processes", "vllm"] = "processes"
    router: bool = Field(
        True,
        description="dp over several GPUs as processes: one endpoint (ocrserve.vllm.router) "
        "in front of the replicas; False: a URL per replica",
    )
    host: str = "127.0.0.1"
    port: int = 8000
    vllm_bin: str = "vllm"
    load_format: str | None = None
    mm_processor_cache_gb: float = 1.0
    prefix_caching: bool = True
    enforce_eager: bool = False
    renderer_workers: int = Field(
        8,
        ge=0,
        description="threads of vLLM's API server that turn a request into model "
        "inputs (the image preprocessing); 0: leave vLLM's default (1)",
    )
    epd_encoders: int = 1
    ec_connector: str = "ECExampleConnector"
    ec_storage: str = "/dev/shm/ocrserve-ec"
    extra_args: list[str] = Field(default_factory=list)


def _split_bin(vllm_bin: str) -> list[str]:
    return shlex.split(vllm_bin) if " " in vllm_bin else [vllm_bin]


def _ocr_flags(opts: ServeOptions, profile: Profile, plan: ServePlan) -> list[str]:
    own_mm = "--mm-processor-kwargs" in profile.server_args
    mm = (
        {"min_pixels": profile.server_min_pixels, "max_pixels": profile.server_max_pixels}
        if profile.server_pixel_bounds
        else {"max_pixels": profile.max_pixels}
    )
    flags = [
        "--served-model-name",
        opts.served_model_name,
        "--limit-mm-per-prompt",
        json.dumps({"image": 1, "video": 0}, separators=(",", ":")),
        *([] if own_mm else ["--mm-processor-kwargs", json.dumps(mm, separators=(",", ":"))]),
        "--mm-processor-cache-gb",
        f"{opts.mm_processor_cache_gb:g}",
        # retries re-send the same page: the prefix cache turns their prefill into a lookup
        "--enable-prefix-caching" if opts.prefix_caching else "--no-enable-prefix-caching",
        *plan.vllm_args(),
    ]
    if opts.load_format:
        flags += ["--load-format", opts.load_format]
    if opts.enforce_eager:
        flags += ["--enforce-eager"]
    if opts.renderer_workers:
        flags += ["--renderer-num-workers", str(opts.renderer_workers)]
    return flags + list(profile.server_args)


RENDERER_WORKERS_SINCE = (0, 26)  # the vLLM the flag was measured with (bench/results/gpu-h200/sweep-2026-12-03c)


def renderer_workers_for(requested: int, vllm_version: str | None) -> tuple[int, str | None]:
    """The renderer threads to ask for, and a warning when an older vLLM (installed here) makes it 0."""
    if not requested or not vllm_version:
        return requested, None
    try:
        have = tuple(int(x) for x in vllm_version.split(".")[:2])
    except ValueError:
        return requested, None
    if have < RENDERER_WORKERS_SINCE:
        return 0, (
            f"vLLM {vllm_version} is older than {'.'.join(map(str, RENDERER_WORKERS_SINCE))}: "
            "--renderer-num-workers left out (one API renderer thread: vision + prefill is capped lower)"
        )
    return requested, None


def _vllm(opts: ServeOptions, port: int, flags: list[str]) -> list[str]:
    return [
        *_split_bin(opts.vllm_bin),
        "serve",
        opts.model,
        "--host",
        opts.host,
        "--port",
        str(port),
        *flags,
        *opts.extra_args,
    ]


def _cuda(gpus: list[int]) -> dict[str, str]:
    return {"CUDA_VISIBLE_DEVICES": ",".join(str(g) for g in gpus)}


def build_layout(opts: ServeOptions, profile: Profile, plan: ServePlan) -> Layout:
    """The processes for `opts.parallel` over `opts.gpus`; `plan` is the per-GPU memory plan."""
    if not opts.gpus:
        raise ValueError("no GPUs to serve on")
    if len(set(opts.gpus)) != len(opts.gpus):
        raise ValueError(f"--gpus lists a GPU twice: {opts.gpus}")
    flags = _ocr_flags(opts, profile, plan)
    procs: list[ProcessSpec] = []
    n = len(opts.gpus)
    if opts.parallel == "dp" and (opts.dp_backend == "processes" or n == 1):
        routed = opts.router and n > 1  # the router on the port asked for, the replicas behind it on loopback
        host = "127.0.0.1" if routed else opts.host
        for i, g in enumerate(opts.gpus):
            port = opts.port + i + routed
            procs.append(
                ProcessSpec(
                    name=f"replica-{i}",
                    role="replica",
                    env=_cuda([g]),
                    host=host,
                    port=port,
                    gpus=[g],
                    argv=_vllm(opts.model_copy(update={"host": host}), port, flags),
                )
            )
        if routed:
            procs.append(_router(opts, procs))
        endpoints = [f"{procs[-1].url}/v1"] if routed else [f"{p.url}/v1" for p in procs]
    elif opts.parallel in ("dp", "tp"):
        size = "--data-parallel-size" if opts.parallel == "dp" else "--tensor-parallel-size"
        argv = _vllm(opts, opts.port, flags + [size, str(n)])
        procs.append(
            ProcessSpec(
                name="replica-0",
                role="replica",
                argv=argv,
                env=_cuda(opts.gpus),
                host=opts.host,
                port=opts.port,
                gpus=list(opts.gpus),
            )
        )
        endpoints = [f"{procs[0].url}/v1"]
    else:
        procs = _epd(opts, flags, plan)
        endpoints = [f"{procs[-1].url}/v1"]
    _image_processor_threads(procs)
    return Layout(parallel=opts.parallel, processes=procs, endpoints=endpoints)


def _image_processor_threads(procs: list[ProcessSpec], cap: int = 4) -> None:
    """OMP_NUM_THREADS for each vLLM process, unless the user set it. vLLM's API server runs the HF image
    processor (uint8 -> float, normalise, patchify, bf16) under torch's thread count from $OMP_NUM_THREADS, one
    thread when it is unset (vllm/utils/torch_utils.py set_default_torch_num_threads); these are per-element
    operations, so the pixel values are the same on any number of threads. Measured on an H200 host (Chandra 1,
    idle, a 1632x2112 page): TTFT 0.467 s on one thread, 0.350 s on four (bench/results/gpu-h200/api-threads-2026-12-04/).
    At most `cap` threads, and the host's cores shared among the vLLM processes."""
    if "OMP_NUM_THREADS" in os.environ:
        return
    vllm = [p for p in procs if p.role != "router" and p.role != "proxy"]
    threads = max(1, min(cap, (os.cpu_count() or 1) // max(1, len(vllm))))
    for p in vllm:
        p.env.setdefault("OMP_NUM_THREADS", str(threads))


def _router(opts: ServeOptions, replicas: list[ProcessSpec]) -> ProcessSpec:
    argv = [
        sys.executable,
        "-m",
        "ocrserve.vllm.router",
        "--host",
        opts.host,
        "--port",
        str(opts.port),
        "--replicas",
        ",".join(p.url for p in replicas),
    ]
    return ProcessSpec(name="router", role="router", argv=argv, host=opts.host, port=opts.port)


def _ec_config(opts: ServeOptions, role: str) -> str:
    cfg = {
        "ec_connector": opts.ec_connector,
        "ec_role": role,
        "ec_connector_extra_config": {"shared_storage_path": opts.ec_storage},
    }
    return json.dumps(cfg, separators=(",", ":"))


def _epd(opts: ServeOptions, flags: list[str], plan: ServePlan) -> list[ProcessSpec]:
    n = len(opts.gpus)
    n_enc = opts.epd_encoders
    if n < 2:
        raise ValueError("--parallel epd needs at least 2 GPUs: encoders on some, the decoder on the others")
    if not 1 <= n_enc < n:
        raise ValueError(f"--epd-encoders must be between 1 and {n - 1} for {n} GPUs, got {n_enc}")
    enc_gpus, dec_gpus = opts.gpus[:n_enc], opts.gpus[n_enc:]
    procs: list[ProcessSpec] = []
    # encoders: vision tower only; a KV cache of one sequence (the language model is skipped)
    enc_flags = _replace_flag(flags, "--kv-cache-memory-bytes", str(plan.max_model_len * plan.kv_bytes_per_token))
    enc_flags = _drop_flag(enc_flags, "--gpu-memory-utilization", 1)
    enc_flags = _replace_flag(enc_flags, "--enable-prefix-caching", None, "--no-enable-prefix-caching")
    enc_flags += ["--mm-encoder-only", "--ec-transfer-config", _ec_config(opts, "ec_producer")]
    dec_flags = flags + ["--ec-transfer-config", _ec_config(opts, "ec_consumer")]
    stages: list[tuple[Literal["encoder", "decoder"], list[int], list[str]]] = [
        ("encoder", enc_gpus, enc_flags),
        ("decoder", dec_gpus, dec_flags),
    ]
    for role, gpus, role_flags in stages:  # the encoders' ports first, then the decoders'
        for i, g in enumerate(gpus):
            port = opts.port + 1 + len(procs)
            procs.append(
                ProcessSpec(
                    name=f"{role}-{i}",
                    role=role,
                    argv=_vllm(opts, port, role_flags),
                    env=_cuda([g]),
                    host=opts.host,
                    port=port,
                    gpus=[g],
                )
            )
    proxy = [
        sys.executable,
        "-m",
        "ocrserve.vllm.epd_proxy",
        "--host",
        opts.host,
        "--port",
        str(opts.port),
        "--encoders",
        ",".join(p.url for p in procs if p.role == "encoder"),
        "--decoders",
        ",".join(p.url for p in procs if p.role == "decoder"),
    ]
    procs.append(ProcessSpec(name="proxy", role="proxy", argv=proxy, host=opts.host, port=opts.port))
    return procs


def _replace_flag(args: list[str], flag: str, value: str | None, new_flag: str | None = None) -> list[str]:
    out = list(args)
    if flag in out:
        i = out.index(flag)
        if value is None:
            out[i] = new_flag or flag
        else:
            out[i + 1] = value
    elif value is not None:
        out += [flag, value]
    return out


def _drop_flag(args: list[str], flag: str, nvalues: int) -> list[str]:
    out = list(args)
    if flag in out:
        i = out.index(flag)
        del out[i : i + 1 + nvalues]
    return out


def model_ref(model: str, profile: Profile) -> str:
    """What vllm serve gets: a local folder as an absolute path, else the profile's checkpoint."""
    p = Path(model)
    if p.is_dir():
        return str(p.resolve())
    return profile.checkpoint
