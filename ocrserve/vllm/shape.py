"""A model's memory figures (`ModelShape`): parameters, decoder layers, KV heads and head dim, from its
profile and corrected by a local model folder's config.json, and what they cost on the GPU: the weights
(bf16, or vLLM's online fp8 for the decoder's linear layers) and the KV cache of one token, plus the
fixed-size state a sequence holds in linear-attention layers (Qwen3.5's Gated DeltaNet)."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from ocrserve.profiles import Figures, Profile

log = logging.getLogger(__name__)

BF16 = 2
FP8 = 1
# Qwen vocabulary (Chandra 1 and 2); used when the model folder does not say.
DEFAULT_VOCAB = 151_936


class ModelShape(Figures):
    """The figures of a model that decide its memory: a profile's Figures, and these."""

    vocab_size: int = DEFAULT_VOCAB
    tie_word_embeddings: bool = False
    # layers with a growing KV cache; hybrid models (Qwen3.5's linear attention) have fewer
    attention_layers: int | None = None
    # fixed-size state of one sequence in the linear-attention layers (Gated DeltaNet: fp32 recurrent
    # state + bf16 convolution window), bytes; 0 for models without such layers
    linear_state_bytes_per_seq: int = 0
    # how many of the decoder layers are linear-attention layers (0: none)
    linear_layers: int = 0

    @classmethod
    def from_profile(cls, profile: Profile) -> ModelShape:
        attn, state = None, 0
        if profile.architecture == "qwen3_5":
            # Qwen3.5 interleaves 3 linear-attention (fixed-size state) layers per full-attention one
            attn = max(1, profile.decoder_layers // 4)
            state = (profile.decoder_layers - attn) * gdn_state_bytes()
        figures = profile.model_dump(include=set(Figures.model_fields))
        linear = profile.decoder_layers - attn if attn else 0
        return cls(**figures, attention_layers=attn, linear_state_bytes_per_seq=state, linear_layers=linear)

    def with_model_config(self, model_dir: Path) -> ModelShape:
        """This shape corrected by a local model folder's config.json (text_config for VLMs)."""
        cfg_path = model_dir / "config.json"
        if not cfg_path.is_file():
            return self
        try:
            cfg = json.loads(cfg_path.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as e:
            raise ValueError(f"model config {cfg_path} cannot be read: {e}") from e
        text = cfg.get("text_config") or cfg
        upd: dict[str, Any] = {}
        for ours, theirs in [
            ("decoder_layers", "num_hidden_layers"),
            ("hidden_size", "hidden_size"),
            ("num_kv_heads", "num_key_value_heads"),
            ("vocab_size", "vocab_size"),
        ]:
            if isinstance(text.get(theirs), int):
                upd[ours] = text[theirs]
        if isinstance(text.get("head_dim"), int):
            upd["head_dim"] = text["head_dim"]
        elif "hidden_size" in upd and isinstance(text.get("num_attention_heads"), int):
            upd["head_dim"] = upd["hidden_size"] // text["num_attention_heads"]
        tie = cfg.get("tie_word_embeddings", text.get("tie_word_embeddings"))
        if isinstance(tie, bool):
            upd["tie_word_embeddings"] = tie
        types = text.get("layer_types")
        if isinstance(types, list) and types:
            upd["attention_layers"] = max(1, sum(1 for t in types if t == "full_attention"))
            linear = sum(1 for t in types if t == "linear_attention")
            upd["linear_layers"] = linear
            dims = {
                k: text[k]
                for k in (
                    "linear_num_key_heads",
                    "linear_num_value_heads",
                    "linear_key_head_dim",
                    "linear_value_head_dim",
                    "linear_conv_kernel_dim",
                )
                if isinstance(text.get(k), int)
            }
            upd["linear_state_bytes_per_seq"] = linear * gdn_state_bytes(
                **{k[len("linear_") :]: v for k, v in dims.items()}
            )
        log.debug("model shape from %s: %s", cfg_path, upd)
        return self.model_copy(update=upd)

    @property
    def kv_layers(self) -> int:
        return self.attention_layers or self.decoder_layers

    def kv_bytes_per_token(self, kv_dtype_bytes: int) -> int:
        return 2 * self.kv_layers * self.num_kv_heads * self.head_dim * kv_dtype_bytes

    def hybrid_pool(self, kv_dtype_bytes: int, kernel_block: int = 16) -> HybridPool | None:
        """How vLLM lays out the shared cache pool of a hybrid model (None for a model without linear
        attention); `HybridPool` says what that costs a sequence."""
        if not self.linear_layers or not self.linear_state_bytes_per_seq:
            return None
        return HybridPool.of(
            attention_layers=self.kv_layers,
            linear_layers=self.linear_layers,
            attn_bytes_per_token_layer=self.kv_bytes_per_token(kv_dtype_bytes) // self.kv_layers,
            state_bytes_per_layer=self.linear_state_bytes_per_seq // self.linear_layers,
            kernel_block=kernel_block,
        )

    def weight_bytes(self, fp8: bool) -> int:
        """Weights in GPU memory: with fp8 only the decoder's linear layers shrink to 1 byte."""
        embed = self.vocab_size * self.hidden_size * (1 if self.tie_word_embeddings else 2)
        total = self.params_b * 1e9
        if not fp8:
            return int(total * BF16)
        kept_bf16 = embed + self.vision_params_b * 1e9
        return int(kept_bf16 * BF16 + max(0.0, total - kept_bf16) * FP8)


def gdn_state_bytes(
    num_key_heads: int = 16,
    num_value_heads: int = 32,
    key_head_dim: int = 128,
    value_head_dim: int = 128,
    conv_kernel_dim: int = 4,
) -> int:
    """One sequence's state in one Gated-DeltaNet layer (Qwen3.5's defaults): fp32 recurrent state
    (value heads x key dim x value dim) plus the bf16 convolution window over q, k and v."""
    recurrent = num_value_heads * key_head_dim * value_head_dim * 4
    conv = (2 * num_key_heads * key_head_dim + num_value_heads * value_head_dim) * (conv_kernel_dim - 1) * BF16
    return recurrent + conv


class HybridPool(BaseModel):
    """vLLM's (0.26) one cache pool for a hybrid model, without prefix caching (`--no-enable-prefix-caching`).

    Attention and linear-attention layers share blocks of one page size: an attention block is made long
    enough (`block_tokens`, a multiple of the kernel's 16) that its page of one layer holds one layer's
    linear-attention state (`Platform._align_hybrid_block_size`). Layers are grouped `group_size` to a
    group (the fewer type's count, `_get_kv_cache_groups_uniform_page_size`); a block of the pool is a page
    in each of the `group_size` layer slots. A sequence holds one block in every linear-attention group
    (its state) and ceil(tokens / block_tokens) blocks in every attention group; block 0 is vLLM's null
    block. So a page costs whole 500-1,000-token blocks, and the state costs a block a group, not its size
    (two with prefix caching: `blocks`).
    """

    block_tokens: int
    page_bytes: int  # one block of one layer slot
    group_size: int
    attention_groups: int
    linear_groups: int

    @classmethod
    def of(
        cls,
        *,
        attention_layers: int,
        linear_layers: int,
        attn_bytes_per_token_layer: int,
        state_bytes_per_layer: int,
        kernel_block: int = 16,
    ) -> HybridPool:
        block = kernel_block * -(-state_bytes_per_layer // (kernel_block * attn_bytes_per_token_layer))
        lo, hi = sorted((attention_layers, linear_layers))
        group = hi if hi < lo * 1.5 else lo
        return cls(
            block_tokens=block,
            page_bytes=block * attn_bytes_per_token_layer,
            group_size=group,
            attention_groups=-(-attention_layers // group),
            linear_groups=-(-linear_layers // group),
        )

    @property
    def block_bytes(self) -> int:
        """Memory of one block of the pool (a page in every layer slot)."""
        return self.page_bytes * self.group_size

    def blocks(self, tokens: int, *, prefix_caching: bool = False) -> int:
        """Blocks one sequence of `tokens` holds. With prefix caching vLLM runs the linear-attention layers in
        its 'align' mode: a sequence holds the state block of its previous step beside the current one."""
        states = 2 if prefix_caching else 1
        return states * self.linear_groups + self.attention_groups * -(-tokens // self.block_tokens)
