"""Loading a Chandra checkpoint for the hf engine: torch/transformers, the device and dtype, the
checkpoint folder (local or from the Hugging Face Hub), the model class, the chat template."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

from ocrserve.engines.base import EngineError

# model_type -> the transformers class that runs it (anything else: AutoModelForImageTextToText)
MODEL_CLASSES = {"qwen3_vl": "Qwen3VLForConditionalGeneration", "qwen3_5": "Qwen3_5ForConditionalGeneration"}
# files a checkpoint download fetches (weights, configs, tokenizer, templates)
HUB_PATTERNS = ["*.json", "*.safetensors", "*.jinja", "*.txt", "*.model", "*.tiktoken"]
DTYPES = {
    "bf16": "bfloat16",
    "bfloat16": "bfloat16",
    "fp16": "float16",
    "float16": "float16",
    "half": "float16",
    "fp32": "float32",
    "float32": "float32",
    "float": "float32",
}
IMAGE_TOKEN = "<|image_pad|>"
# what a Hub id looks like (anything else is taken for a local path)
HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]*(/[A-Za-z0-9][\w.-]*)?")


def import_torch():
    try:
        import torch
        import transformers  # noqa: F401
    except ImportError as exc:
        raise EngineError(
            f"engine hf needs the [hf] extra ({exc}): pip install '.[hf]' (in a clone of ocrserve; it is not on PyPI)"
        ) from exc
    return torch


def resolve_device(device: str | None) -> str:
    """'cuda', 'cuda:N', 'mps' or 'cpu'; None/'auto' picks CUDA, then MPS, then CPU."""
    torch = import_torch()
    if device is None or device in ("", "auto"):
        if torch.cuda.is_available():
            return "cuda"
        if torch.backends.mps.is_available():
            return "mps"
        return "cpu"
    kind, _, index = device.partition(":")
    if kind == "cuda":
        if not torch.cuda.is_available():
            why = "this torch build has no CUDA support" if torch.version.cuda is None else "no CUDA GPU is visible"
            raise EngineError(
                f"device {device!r} is not available: {why} (torch {torch.__version__}); use --device cpu"
            )
        if index and (not index.isdigit() or int(index) >= torch.cuda.device_count()):
            raise EngineError(f"device {device!r} does not exist: {torch.cuda.device_count()} CUDA device(s) visible")
        return device
    if kind == "mps" and not index:
        if not torch.backends.mps.is_available():
            raise EngineError(f"device {device!r} is not available: MPS needs Apple silicon and a macOS torch build")
        return device
    if kind == "cpu" and not index:
        return device
    raise EngineError(f"unsupported device {device!r}: use cuda, cuda:N, mps, cpu or auto")


def resolve_dtype(dtype: Any, device: str):
    """A torch dtype: bf16 on CUDA, fp16 on MPS, fp32 on CPU unless asked otherwise."""
    torch = import_torch()
    if dtype is None or dtype == "auto":
        kind = device.split(":")[0]
        return {"cuda": torch.bfloat16, "mps": torch.float16}.get(kind, torch.float32)
    if isinstance(dtype, torch.dtype):
        return dtype
    name = DTYPES.get(str(dtype).lower().removeprefix("torch."))
    if name is None:
        raise EngineError(f"unsupported dtype {dtype!r}: use bf16, fp16 or fp32")
    return getattr(torch, name)


def _offline() -> bool:
    return any(
        os.environ.get(v, "").strip().lower() in ("1", "true", "yes", "on")
        for v in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")
    )


def resolve_checkpoint(checkpoint: str) -> Path:
    """The local folder of a checkpoint: the folder itself, or the Hub snapshot (downloaded if needed)."""
    path = Path(checkpoint).expanduser()
    if path.is_dir():
        if not (path / "config.json").is_file():
            raise EngineError(f"checkpoint folder {path} has no config.json: it is not a transformers model folder")
        return path
    if path.exists():
        raise EngineError(f"checkpoint {checkpoint!r} is a file: give a model folder or a Hugging Face Hub id")
    if not HUB_ID.fullmatch(checkpoint):
        raise EngineError(f"checkpoint folder {checkpoint!r} does not exist")
    try:
        from huggingface_hub import snapshot_download
        from huggingface_hub.errors import (
            GatedRepoError,
            HFValidationError,
            LocalEntryNotFoundError,
            RepositoryNotFoundError,
        )
    except ImportError as exc:  # pragma: no cover - huggingface_hub comes with transformers
        raise EngineError(
            f"engine hf needs the [hf] extra ({exc}): pip install '.[hf]' (in a clone of ocrserve)"
        ) from exc
    offline = _offline()
    try:
        return Path(snapshot_download(checkpoint, local_files_only=offline, allow_patterns=HUB_PATTERNS))
    except HFValidationError as exc:
        raise EngineError(
            f"checkpoint {checkpoint!r} is neither an existing folder nor a valid Hugging Face Hub id ({exc})"
        ) from exc
    except GatedRepoError as exc:
        raise EngineError(
            f"checkpoint {checkpoint!r} is gated on the Hugging Face Hub: accept its licence there and set HF_TOKEN"
        ) from exc
    except RepositoryNotFoundError as exc:
        raise EngineError(
            f"checkpoint {checkpoint!r} was not found on the Hugging Face Hub (a private repository needs HF_TOKEN)"
        ) from exc
    except LocalEntryNotFoundError as exc:
        if offline:
            raise EngineError(
                f"checkpoint {checkpoint!r} is not in the local Hugging Face cache and offline mode is on "
                "(HF_HUB_OFFLINE/TRANSFORMERS_OFFLINE): download it first or pass a local folder"
            ) from exc
        raise EngineError(
            f"checkpoint {checkpoint!r} could not be downloaded (no connection to the Hub?) and is not in the local cache"
        ) from exc
    except OSError as exc:
        raise EngineError(f"checkpoint {checkpoint!r} could not be downloaded: {exc}") from exc


def model_class(model_type: str):
    import transformers

    name = MODEL_CLASSES.get(model_type)
    if name is None:
        return transformers.AutoModelForImageTextToText
    cls = getattr(transformers, name, None)
    if cls is None:
        raise EngineError(
            f"transformers {transformers.__version__} cannot run model type {model_type!r} ({name} is missing): "
            "upgrade transformers"
        )
    return cls


def as_list(value) -> list[int]:
    if value is None:
        return []
    if isinstance(value, (list, tuple)):
        return [int(v) for v in value]
    return [int(value)]


END_OF_TURN = "<|im_end|>"


def stop_token_ids(generation_config, tokenizer) -> list[int]:
    """The ids an answer ends at: the generation config's end-of-sequence ids, the tokenizer's, and
    `<|im_end|>` where the tokenizer has it. The model closes its turn with `<|im_end|>` while a generation
    config may name only `<|endoftext|>` (Chandra 2's): chandra-ocr 0.2.0's transformers path adds it too."""
    ids = as_list(getattr(generation_config, "eos_token_id", None)) + as_list(tokenizer.eos_token_id)
    if END_OF_TURN in tokenizer.get_vocab():
        ids.append(int(tokenizer.convert_tokens_to_ids(END_OF_TURN)))
    return sorted(set(ids))


def read_chat_template(folder: Path) -> str | None:
    jinja = folder / "chat_template.jinja"
    if jinja.is_file():
        return jinja.read_text(encoding="utf-8")
    js = folder / "chat_template.json"
    if js.is_file():
        data = json.loads(js.read_text(encoding="utf-8"))
        return data.get("chat_template") if isinstance(data, dict) else None
    return None
