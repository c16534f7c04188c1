"""Memory planner: GPU memory, model shape and wanted concurrency -> how vLLM should use the card.

`--memory max` is vLLM's usual way: take 90% of the card (`--gpu-memory-utilization 0.9`) and give
everything the weights and activations leave to the KV cache. `--memory lean` sizes the KV cache
from the work instead (`--kv-cache-memory-bytes`): the wanted number of pages in flight times the
tokens one page holds in the cache, so the card keeps what the work does not need.

Token budget of one page (Chandra on Qwen-VL patch grids):
  - image: at most `max_pixels / patch_multiple**2` visual tokens (6.29 MP / 32**2 = 6,144); a
    typical document page (US letter rendered at the profile's dpi) is about 3,400;
  - prompt text: about 400 tokens (the prompt file, ~4 characters a token, plus the chat template);
  - output: at most `sampling.max_tokens` (12,384) -> the longest sequence, `--max-model-len`;
    on average far fewer (a dense page is ~1,000-1,500 tokens), which is what the KV plan uses.

The KV cache of one token is 2 (K and V) x decoder layers x KV heads x head dim x dtype bytes (the
model's figures and what they cost: shape.py's ModelShape).
Precision: bf16 by default, what Chandra is published and evaluated in. `--quantization fp8` (vLLM's
online fp8: weights and KV cache) changes the model's output and only saves memory: the decoder's
linear layers shrink to 1 byte a parameter, embeddings, LM head and the vision tower stay bf16
(16.8 GiB bf16 -> 10.0 GiB fp8 measured for Chandra 1), the KV cache halves.

`ocrserve serve` sizes the lean plan for 128 pages in flight, or for as many as fit in 90% of the
card when 128 do not (`fitting_concurrency`); a --concurrency given is planned as asked.
"""

from __future__ import annotations

import math
from typing import Literal

from pydantic import BaseModel, Field

from ocrserve.profiles import Profile
from ocrserve.vllm.shape import BF16, FP8
from ocrserve.vllm.shape import ModelShape as ModelShape  # its callers' import (cli/serve.py, tests)

GIB = 1024**3
# chat template + prompt text overhead beyond the prompt's own characters
TEMPLATE_TOKENS = 20
CHARS_PER_TOKEN = 4
# CUDA context, NCCL/cuBLAS workspaces, allocator slack: memory vLLM does not hand to tensors
RUNTIME_OVERHEAD_GIB = 1.5
# CUDA graphs captured for decode batch sizes up to max_num_seqs (torch.compile piecewise graphs)
CUDA_GRAPH_GIB = 1.0
# fraction of the card `--memory max` takes (vLLM's default); also what an automatic lean plan may fill
MAX_UTILIZATION = 0.9
# pages in flight a replica is sized for unless told otherwise
DEFAULT_CONCURRENCY = 128


class GPU(BaseModel):
    """One local GPU as nvidia-smi reports it."""

    index: int
    memory_gib: float = Field(gt=0)
    name: str = "GPU"


class PageBudget(BaseModel):
    """Tokens one page takes: worst case (sets max model length) and planned (sets the KV cache)."""

    max_image_tokens: int
    typical_image_tokens: int
    prompt_tokens: int
    max_output_tokens: int
    expected_output_tokens: int

    @property
    def max_model_len(self) -> int:
        """Longest sequence: the largest image, the prompt and every output token, rounded up to 256."""
        n = self.max_image_tokens + self.prompt_tokens + self.max_output_tokens
        return int(math.ceil(n / 256) * 256)

    @property
    def planned_tokens(self) -> int:
        """KV tokens one page in flight is planned to hold (a typical page, expected output length)."""
        return self.typical_image_tokens + self.prompt_tokens + self.expected_output_tokens

    @property
    def max_prefill_tokens(self) -> int:
        return self.max_image_tokens + self.prompt_tokens


def page_budget(
    profile: Profile, *, expected_output_tokens: int = 1024, max_output_tokens: int | None = None
) -> PageBudget:
    """Token budget of a page for this profile (pixel budget on its patch grid, prompt, output)."""
    pm = profile.patch_multiple
    max_image = profile.max_pixels // (pm * pm)
    # typical page: US letter (8.5 x 11 in) at the profile's render dpi, on the patch grid
    w = max(profile.min_short_side, round(8.5 * profile.pdf_dpi))
    h = round(w * 11 / 8.5)
    if w * h > profile.max_pixels:
        s = math.sqrt(profile.max_pixels / (w * h))
        w, h = int(w * s), int(h * s)
    typical = min(max_image, profile.image_tokens(w, h))
    try:
        prompt = len(profile.prompt) // CHARS_PER_TOKEN + TEMPLATE_TOKENS
    except OSError:  # a profile whose prompt file is missing still gets a plan
        prompt = 400
    max_out = max_output_tokens or profile.sampling.max_tokens
    return PageBudget(
        max_image_tokens=max_image,
        typical_image_tokens=typical,
        prompt_tokens=prompt,
        max_output_tokens=max_out,
        expected_output_tokens=min(expected_output_tokens, max_out),
    )


class ServePlan(BaseModel):
    """How one vLLM replica uses its GPU; every figure in GiB unless named otherwise."""

    memory: Literal["lean", "max"]
    quantization: Literal["fp8", "none"]
    gpu_memory_gib: float
    concurrency: int
    weights_gib: float
    kv_bytes_per_token: int
    kv_cache_bytes: int
    activations_gib: float
    cuda_graphs_gib: float
    overhead_gib: float
    max_model_len: int
    max_num_seqs: int
    max_num_batched_tokens: int
    planned_tokens_per_page: int
    max_image_tokens: int
    gpu_memory_utilization: float | None = None
    linear_state_bytes: int = 0  # part of kv_cache_bytes: linear-attention states of the pages in flight
    block_tokens: int = 16  # tokens of one KV cache block (a hybrid model's are long: shape.HybridPool)

    @property
    def kv_cache_gib(self) -> float:
        return self.kv_cache_bytes / GIB

    @property
    def total_gib(self) -> float:
        return self.weights_gib + self.kv_cache_gib + self.activations_gib + self.cuda_graphs_gib + self.overhead_gib

    @property
    def fraction_of_gpu(self) -> float:
        return self.total_gib / self.gpu_memory_gib

    @property
    def kv_tokens(self) -> int:
        return (self.kv_cache_bytes - self.linear_state_bytes) // self.kv_bytes_per_token

    @property
    def expected_concurrency(self) -> int:
        """Typical pages the KV cache holds at once (capped by max_num_seqs)."""
        return min(self.max_num_seqs, self.kv_tokens // self.planned_tokens_per_page)

    def vllm_args(self) -> list[str]:
        args = [
            "--max-model-len",
            str(self.max_model_len),
            "--max-num-seqs",
            str(self.max_num_seqs),
            "--max-num-batched-tokens",
            str(self.max_num_batched_tokens),
        ]
        if self.memory == "lean":
            args += ["--kv-cache-memory-bytes", str(self.kv_cache_bytes)]
        else:
            args += ["--gpu-memory-utilization", f"{self.gpu_memory_utilization:g}"]
        if self.quantization == "fp8":
            args += ["--quantization", "fp8", "--kv-cache-dtype", "fp8"]
        return args

    def describe(self) -> str:
        lines = [
            f"memory plan ({self.memory}, {'fp8 weights + fp8 KV' if self.quantization == 'fp8' else 'bf16'}) "
            f"on a {self.gpu_memory_gib:.1f} GiB GPU:",
            f"  weights           {self.weights_gib:7.1f} GiB",
            f"  KV cache          {self.kv_cache_gib:7.1f} GiB  ({self.kv_tokens:,} tokens, "
            f"{self.kv_bytes_per_token / 1024:.0f} KiB a token"
            + (
                f"; {self.linear_state_bytes / GIB:.1f} GiB linear-attention state, blocks of {self.block_tokens} tokens"
                if self.linear_state_bytes
                else ""
            )
            + ")",
            f"  activations       {self.activations_gib:7.1f} GiB  (prefill of {self.max_num_batched_tokens:,} tokens, "
            f"vision tower on a {self.max_image_tokens:,}-token page)",
            f"  CUDA graphs       {self.cuda_graphs_gib:7.1f} GiB",
            f"  runtime overhead  {self.overhead_gib:7.1f} GiB",
            f"  total             {self.total_gib:7.1f} GiB  = {self.fraction_of_gpu:.0%} of the GPU",
            f"  pages in flight   {self.expected_concurrency} expected of {self.concurrency} wanted "
            f"({self.planned_tokens_per_page:,} tokens a typical page; longest sequence {self.max_model_len:,})",
        ]
        return "\n".join(lines)


def activation_gib(shape: ModelShape, batched_tokens: int, max_image_tokens: int) -> float:
    """Peak activations of one forward: the decoder's MLP on a prefill chunk, logits, the vision tower.

    Decoder: ~intermediate (3 x hidden) x 2 (gate/up) x 2 bytes, plus residual copies, per token.
    Vision tower: 4 patches per merged token, attention over the page, ~2 KiB x hidden a patch.
    """
    decoder = batched_tokens * shape.hidden_size * 16
    logits = 1024 * shape.vocab_size * 4
    vision = max_image_tokens * 4 * 1152 * 16
    return (decoder + logits + vision) / GIB + 0.5


def plan_replica(
    profile: Profile,
    shape: ModelShape,
    gpu_memory_gib: float,
    *,
    memory: Literal["lean", "max"] = "lean",
    quantization: Literal["fp8", "none"] = "none",
    concurrency: int = DEFAULT_CONCURRENCY,
    expected_output_tokens: int = 1024,
    max_output_tokens: int | None = None,
    max_num_batched_tokens: int | None = None,
    gpu_memory_utilization: float | None = None,
    weight_share: float = 1.0,
    prefix_caching: bool = True,
) -> ServePlan:
    """The plan for one vLLM replica (one GPU; `weight_share` < 1 when tensor parallel splits the weights;
    `prefix_caching`: vLLM's, which costs a hybrid model a second state block a sequence)."""
    if concurrency < 1:
        raise ValueError(f"concurrency must be at least 1, got {concurrency}")
    if gpu_memory_gib <= 0:
        raise ValueError(f"GPU memory must be positive, got {gpu_memory_gib} GiB")
    fp8 = quantization == "fp8"
    budget = page_budget(profile, expected_output_tokens=expected_output_tokens, max_output_tokens=max_output_tokens)
    # two largest pages' prefill a step: the workload is prefill (vision + prompt) bound
    batched = max_num_batched_tokens or max(8192, int(math.ceil(2 * budget.max_prefill_tokens / 2048) * 2048))
    weights = shape.weight_bytes(fp8) * weight_share / GIB
    act = activation_gib(shape, batched, budget.max_image_tokens)
    kv_per_tok = int(shape.kv_bytes_per_token(FP8 if fp8 else BF16) * weight_share)
    fixed = weights + act + CUDA_GRAPH_GIB + RUNTIME_OVERHEAD_GIB
    util = None
    state = 0
    pool = shape.hybrid_pool(FP8 if fp8 else BF16)
    if memory == "lean" and pool is not None:
        # hybrid models (Qwen3.5): vLLM's shared pool of whole blocks (shape.HybridPool), a block in each
        # linear-attention group for a sequence's state plus its tokens in ~500-1,000-token blocks
        per_page = pool.blocks(budget.planned_tokens, prefix_caching=prefix_caching)
        blocks = max(concurrency * per_page, pool.blocks(budget.max_model_len, prefix_caching=prefix_caching)) + 1
        kv_bytes = int(blocks * pool.block_bytes * weight_share)
        state_blocks = per_page - pool.blocks(budget.planned_tokens) + pool.linear_groups
        state = int(concurrency * state_blocks * pool.block_bytes * weight_share)
    elif memory == "lean":
        tokens = max(concurrency * budget.planned_tokens, budget.max_model_len)
        # whole 16-token blocks, plus one block a sequence of rounding
        tokens = int(math.ceil(tokens / 16) * 16) + 16 * concurrency
        kv_bytes = tokens * kv_per_tok
    else:
        util = gpu_memory_utilization or MAX_UTILIZATION
        kv_bytes = int((util * gpu_memory_gib - fixed) * GIB)
    if kv_bytes <= 0 or fixed + kv_bytes / GIB > gpu_memory_gib:
        need = fixed + max(kv_bytes, 0) / GIB
        raise ValueError(
            f"the {memory} plan ({'fp8' if fp8 else 'bf16'}) needs {need:.1f} GiB but the GPU has "
            f"{gpu_memory_gib:.1f} GiB: lower --concurrency, "
            + ("" if fp8 else "use --quantization fp8 (quantized weights and KV cache: it changes the output), ")
            + "or more GPUs"
        )
    if kv_bytes < budget.max_model_len * kv_per_tok:
        raise ValueError(
            f"the KV cache ({kv_bytes / GIB:.1f} GiB) cannot hold one longest sequence of {budget.max_model_len} tokens"
        )
    return ServePlan(
        memory=memory,
        quantization=quantization,
        gpu_memory_gib=gpu_memory_gib,
        concurrency=concurrency,
        weights_gib=weights,
        kv_bytes_per_token=kv_per_tok,
        kv_cache_bytes=kv_bytes,
        activations_gib=act,
        cuda_graphs_gib=CUDA_GRAPH_GIB,
        overhead_gib=RUNTIME_OVERHEAD_GIB,
        max_model_len=budget.max_model_len,
        max_num_seqs=concurrency,
        max_num_batched_tokens=batched,
        planned_tokens_per_page=budget.planned_tokens,
        max_image_tokens=budget.max_image_tokens,
        gpu_memory_utilization=util,
        linear_state_bytes=state,
        block_tokens=pool.block_tokens if pool is not None else 16,
    )


def fitting_concurrency(
    profile: Profile,
    shape: ModelShape,
    gpu_memory_gib: float,
    *,
    wanted: int = DEFAULT_CONCURRENCY,
    utilization: float = MAX_UTILIZATION,
    **plan_kw,
) -> int:
    """The most pages in flight, at most `wanted`, whose lean plan fits in `utilization` of the GPU;
    0 when not even one page does. `plan_kw`: plan_replica's other options (quantization, ...)."""

    def fits(c: int) -> bool:
        try:
            plan_replica(profile, shape, gpu_memory_gib * utilization, memory="lean", concurrency=c, **plan_kw)
            return True
        except ValueError:
            return False

    if fits(wanted):
        return wanted
    lo, hi = 0, wanted  # lo fits (or is 0), hi does not: memory grows with the pages in flight
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if fits(mid) else (lo, mid)
    return lo
