"""Engine `hf`: the model in-process with transformers (debugging, small jobs, no server).

Pages submitted concurrently through `await ocr(page)` are gathered into batches (up to
`batch_size`, waiting `batch_wait_ms` for more when the engine is idle) and each batch runs as one
left-padded `generate()` in a worker thread. Sampling follows the profile: greedy at temperature 0;
a repetition loop or an answer cut off at the token limit is retried with the profile's retry
sampling, up to `max_retries` times, then the page comes back `ok=False` so the pipeline hands it
to the fallback engine (the last answer in `extra["last_raw"]`). Text streams through `on_delta` as it
is generated; before a retried attempt's text comes an empty delta, "the answer starts over" (the
openai engine's convention). `ignore_eos` (benchmarks) forces the full token budget and retries nothing.

A batch that runs out of memory is not lost: the engine halves its batch size (for every later batch
too) and runs the same pages again in batches of that size, down to one page at a time; streamed
pages get the empty "starts over" delta first. Only a page that does not fit on its own fails, with
the batch size and the page size in the error.

Inputs are prepared from the checkpoint's tokenizer (chat template: one user turn, the image, then
the profile's prompt byte for byte) and image processor, expanding the image placeholder to the
image's token count as the Qwen-VL processors do. `AutoProcessor` is not used: for Qwen3-VL it
insists on a video processor, which needs torchvision, and the engine only ever sends images.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import logging
import os
import re
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from PIL import Image

from ocrserve.parse import is_repetition_loop
from ocrserve.profiles import Profile, Sampling
from ocrserve.engines.base import DeltaCallback, EngineError, EngineResult, PageInput

log = logging.getLogger(__name__)

# model_type -> the transformers class that runs it (anything else: AutoModelForImageTextToText)
MODEL_CLASSES = {
    "qwen3_vl": "Qwen3VLForConditionalGeneration",
    "qwen3_5": "Qwen3_5ForConditionalGeneration",
}
# files a checkpoint download fetches (weights, configs, tokenizer, templates)
HUB_PATTERNS = ["*.json", "*.safetensors", "*.jinja", "*.txt", "*.model", "*.tiktoken"]
DTYPES = {
    "bf16": "bfloat16", "bfloat16": "bfloat16",
    "fp16": "float16", "float16": "float16", "half": "float16",
    "fp32": "float32", "float32": "float32", "float": "float32",
}
IMAGE_TOKEN = "<|image_pad|>"
# what a Hub id looks like (anything else is taken for a local path)
HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]*(/[A-Za-z0-9][\w.-]*)?")


def _import_torch():
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
    torch = _import_torch()
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
            raise EngineError(f"device {device!r} is not available: {why} (torch {torch.__version__}); use --device cpu")
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
    torch = _import_torch()
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
    return any(os.environ.get(v, "").strip().lower() in ("1", "true", "yes", "on") for v in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"))


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
            GatedRepoError, HFValidationError, LocalEntryNotFoundError, RepositoryNotFoundError,
        )
    except ImportError as exc:  # pragma: no cover - huggingface_hub comes with transformers
        raise EngineError(f"engine hf needs the [hf] extra ({exc}): pip install '.[hf]' (in a clone of ocrserve)") from exc
    offline = _offline()
    try:
        return Path(snapshot_download(checkpoint, local_files_only=offline, allow_patterns=HUB_PATTERNS))
    except HFValidationError as exc:
        raise EngineError(f"checkpoint {checkpoint!r} is neither an existing folder nor a valid Hugging Face Hub id ({exc})") from exc
    except GatedRepoError as exc:
        raise EngineError(f"checkpoint {checkpoint!r} is gated on the Hugging Face Hub: accept its licence there and set HF_TOKEN") from exc
    except RepositoryNotFoundError as exc:
        raise EngineError(f"checkpoint {checkpoint!r} was not found on the Hugging Face Hub (a private repository needs HF_TOKEN)") from exc
    except LocalEntryNotFoundError as exc:
        if offline:
            raise EngineError(
                f"checkpoint {checkpoint!r} is not in the local Hugging Face cache and offline mode is on "
                "(HF_HUB_OFFLINE/TRANSFORMERS_OFFLINE): download it first or pass a local folder"
            ) from exc
        raise EngineError(f"checkpoint {checkpoint!r} could not be downloaded (no connection to the Hub?) and is not in the local cache") from exc
    except OSError as exc:
        raise EngineError(f"checkpoint {checkpoint!r} could not be downloaded: {exc}") from exc


def _model_class(model_type: str):
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


@dataclass
class _Generated:
    """One sequence of a batch, decoded."""

    text: str = ""
    prompt_tokens: int = 0
    completion_tokens: int = 0
    finish_reason: str = "error"  # stop, length, error
    error: str | None = None
    batch: int = 0                # pages in the generate() call that made it
    oom: list[int] | None = None  # sizes of the batches with this page that ran out of memory first


@dataclass
class _Request:
    image: Image.Image
    sampling: Sampling
    future: asyncio.Future
    sink: Callable[[str], None] | None = None  # called from the worker thread with text deltas
    restart: Callable[[], None] | None = None  # called from the worker thread: the answer starts over

    @property
    def key(self) -> tuple:
        s = self.sampling
        return (s.temperature, s.top_p, s.max_tokens)


class _BatchStreamer:
    """A transformers streamer that splits a batch's tokens per sequence and decodes them as they come.

    generate() first puts the prompt ids (skipped), then the new token of every row at each step. A row
    stops at its first end-of-sequence token. Text is held back while it ends in an incomplete UTF-8
    character; the token window is reset at newlines (and every `window` tokens) to keep decoding cheap.
    """

    def __init__(self, tokenizer, sinks: list[Callable[[str], None] | None], eos_ids: set[int], window: int = 48):
        self.tokenizer = tokenizer
        self.sinks = sinks
        self.eos_ids = eos_ids
        self.window = window
        n = len(sinks)
        self.cache: list[list[int]] = [[] for _ in range(n)]
        self.printed = [0] * n
        self.done = [s is None for s in sinks]
        self.seen_prompt = False

    def put(self, value) -> None:
        if not self.seen_prompt:
            self.seen_prompt = True
            return
        rows = value.reshape(len(self.sinks), -1).tolist()
        for i, toks in enumerate(rows):
            for tok in toks:
                if self.done[i]:
                    break
                if tok in self.eos_ids:
                    self.done[i] = True
                    break
                self.cache[i].append(tok)
                self._emit(i, final=False)

    def end(self) -> None:
        for i in range(len(self.sinks)):
            if self.sinks[i] is not None and self.cache[i]:
                self._emit(i, final=True)
            self.done[i] = True

    def _emit(self, i: int, final: bool) -> None:
        text = self.tokenizer.decode(self.cache[i], skip_special_tokens=True, clean_up_tokenization_spaces=False)
        if text.endswith("\ufffd") and not final:
            return
        delta = text[self.printed[i]:]
        if delta:
            self.sinks[i](delta)
        self.printed[i] = len(text)
        if text.endswith("\n") or len(self.cache[i]) >= self.window:
            self.cache[i] = []
            self.printed[i] = 0


class HFEngine:
    """A Chandra model run in-process with transformers on CUDA, MPS or CPU."""

    name = "hf"

    def __init__(
        self,
        profile: Profile,
        settings=None,
        checkpoint: str | None = None,
        device: str | None = None,
        dtype: Any = None,
        batch_size: int = 8,
        max_tokens: int | None = None,
        batch_wait_ms: float = 5.0,
        ignore_eos: bool = False,
        random_weights: bool = False,
        static_cache: bool = False,
        **_: Any,
    ) -> None:
        """
        checkpoint: Hub id or local folder (default: the profile's). device: cuda, cuda:N, mps, cpu or
        auto. dtype: bf16/fp16/fp32 (default by device). batch_size: pages per generate() call.
        max_tokens: overrides the profile's token limit. ignore_eos and random_weights are for
        benchmarks: a fixed output length, and weights drawn at random from the config (no weights on
        disk, like vLLM's --load-format dummy). static_cache: a preallocated KV cache, with which
        transformers compiles the decoding step on CUDA (torch.compile; the first batch of each size
        pays for the compilation).
        """
        if batch_size < 1:
            raise EngineError(f"batch_size must be at least 1, got {batch_size}")
        torch = _import_torch()
        self.profile = profile
        self.settings = settings
        self.checkpoint = checkpoint or profile.checkpoint
        self.device = resolve_device(device)
        self.dtype = resolve_dtype(dtype, self.device)
        self.batch_size = batch_size
        self.max_tokens = max_tokens
        self.batch_wait_s = max(0.0, batch_wait_ms) / 1000.0
        self.ignore_eos = ignore_eos
        self.static_cache = static_cache
        self._torch = torch

        folder = resolve_checkpoint(self.checkpoint)
        t0 = time.perf_counter()
        self._load(folder, random_weights)
        log.info(
            "hf engine: %s (%s) on %s as %s, batch size %d, loaded in %.1f s",
            self.checkpoint, self.model_type, self.device, str(self.dtype).removeprefix("torch."),
            batch_size, time.perf_counter() - t0,
        )
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="hf-generate")
        self._loop: asyncio.AbstractEventLoop | None = None
        self._queue: asyncio.Queue | None = None
        self._task: asyncio.Task | None = None

    # ---- loading -------------------------------------------------------------------------------

    def _load(self, folder: Path, random_weights: bool) -> None:
        from transformers import AutoConfig, AutoImageProcessor, AutoTokenizer

        try:
            config = AutoConfig.from_pretrained(folder)
        except (OSError, ValueError, KeyError) as exc:
            raise EngineError(f"checkpoint {self.checkpoint!r}: cannot read its config.json ({exc})") from exc
        self.model_type = getattr(config, "model_type", "")
        if self.model_type != self.profile.architecture:
            log.warning(
                "checkpoint %s is a %r model, profile %s expects %r",
                self.checkpoint, self.model_type, self.profile.name, self.profile.architecture,
            )
        cls = _model_class(self.model_type)
        try:
            self.tokenizer = AutoTokenizer.from_pretrained(folder)
            self.image_processor = AutoImageProcessor.from_pretrained(folder)
        except (OSError, ValueError) as exc:
            raise EngineError(f"checkpoint {self.checkpoint!r}: cannot load its tokenizer or image processor ({exc})") from exc
        self.tokenizer.padding_side = "left"
        self.chat_template = self.tokenizer.chat_template or _read_chat_template(folder)
        if not self.chat_template:
            raise EngineError(f"checkpoint {self.checkpoint!r} has no chat template")
        if IMAGE_TOKEN not in self.tokenizer.get_vocab():
            raise EngineError(f"checkpoint {self.checkpoint!r}: its tokenizer has no {IMAGE_TOKEN} token")
        self.image_token_id = self.tokenizer.convert_tokens_to_ids(IMAGE_TOKEN)
        self.merge_size = int(getattr(self.image_processor, "merge_size", 2) or 2)

        torch = self._torch
        try:
            if random_weights:
                with torch.device(self.device):
                    model = cls._from_config(config, dtype=self.dtype)
            else:
                model = cls.from_pretrained(folder, dtype=self.dtype, device_map=self.device)
        except torch.OutOfMemoryError as exc:
            raise EngineError(f"checkpoint {self.checkpoint!r} does not fit in {self.device} memory as {self.dtype}") from exc
        except (OSError, ValueError) as exc:
            raise EngineError(f"checkpoint {self.checkpoint!r}: cannot load the model ({exc})") from exc
        self.model = model.eval()
        self._forward_takes = set(inspect.signature(self.model.forward).parameters)

        gen = getattr(self.model, "generation_config", None)
        eos = _as_list(getattr(gen, "eos_token_id", None)) + _as_list(self.tokenizer.eos_token_id)
        self.eos_ids = sorted(set(eos))
        pad = self.tokenizer.pad_token_id
        if pad is None:
            pad = getattr(gen, "pad_token_id", None)
        self.pad_id = pad if pad is not None else (self.eos_ids[0] if self.eos_ids else 0)
        if self.tokenizer.pad_token_id is None:
            self.tokenizer.pad_token_id = self.pad_id

    # ---- the Engine protocol -------------------------------------------------------------------

    def capacity(self) -> int:
        # one batch generating, one gathering
        return 2 * self.batch_size

    async def aclose(self) -> None:
        if self._task is not None and not self._task.done():
            self._task.cancel()
            try:
                await self._task
            except (asyncio.CancelledError, Exception):
                pass
        self._task = None
        self._executor.shutdown(wait=True)

    async def ocr(self, page: PageInput, *, on_delta: DeltaCallback | None = None) -> EngineResult:
        t0 = time.perf_counter()
        attempts = 0
        problems: list[str] = []
        completions: list[int] = []
        batches: list[int] = []
        oom: list[int] = []

        def result(**kw: Any) -> EngineResult:
            extra = kw.pop("extra", {})
            extra["completion_tokens_per_attempt"] = list(completions)
            extra["batch_sizes"] = list(batches)
            if oom:
                extra["out_of_memory_at"] = list(oom)
            if problems:
                extra["problems"] = list(problems)
            return EngineResult(engine=self.name, attempts=attempts, elapsed_s=time.perf_counter() - t0,
                                extra=extra, **kw)

        try:
            image = page.image.convert("RGB")
        except Exception as exc:  # a page we cannot even decode: fail it, never raise
            return result(ok=False, finish_reason="error", error=f"cannot read the page image: {exc}")
        deltas = _Deltas(asyncio.get_running_loop(), on_delta) if on_delta is not None else None
        sampling = self.profile.sampling
        try:
            while True:
                attempts += 1
                if self.max_tokens:
                    sampling = sampling.model_copy(update={"max_tokens": self.max_tokens})
                if deltas is not None:
                    deltas.reset()
                gen = await self._attempt(image, sampling, deltas)
                completions.append(gen.completion_tokens)
                batches.append(gen.batch)
                oom += gen.oom or []
                if gen.error is not None:
                    return result(ok=False, finish_reason="error", error=gen.error)
                looped = not self.ignore_eos and is_repetition_loop(gen.text)
                cut = not self.ignore_eos and gen.finish_reason == "length"
                if not (looped or cut):
                    return result(ok=True, raw=gen.text, finish_reason=gen.finish_reason,
                                  prompt_tokens=gen.prompt_tokens, completion_tokens=gen.completion_tokens,
                                  error=problems[-1] if problems else None,
                                  extra={"retry_sampling": True} if problems else {})
                what = ("the answer ended in a repetition loop" if looped
                        else f"the answer was cut off at max_tokens={sampling.max_tokens} (finish_reason length)")
                problems.append(what)
                if attempts > self.profile.max_retries:
                    return result(ok=False, raw="", finish_reason="loop" if looped else "length",
                                  prompt_tokens=gen.prompt_tokens, completion_tokens=gen.completion_tokens,
                                  error=f"gave up after {attempts} attempts ({attempts} answers unusable); last: {what}",
                                  extra={"last_raw": gen.text})
                sampling = self.profile.retry_sampling
                log.info("page %s/%d: %s; retrying with retry sampling", page.doc_id, page.index, what)
        finally:
            if deltas is not None:
                await deltas.close()

    # ---- batching --------------------------------------------------------------------------------

    async def _attempt(self, image: Image.Image, sampling: Sampling, deltas: "_Deltas | None") -> _Generated:
        loop = asyncio.get_running_loop()
        self._ensure_batcher(loop)
        request = _Request(image=image, sampling=sampling, future=loop.create_future(),
                           sink=deltas.sink if deltas is not None else None,
                           restart=deltas.restart if deltas is not None else None)
        self._queue.put_nowait(request)
        return await request.future

    def _ensure_batcher(self, loop: asyncio.AbstractEventLoop) -> None:
        if self._loop is loop and self._task is not None and not self._task.done():
            return
        self._loop = loop
        self._queue = asyncio.Queue()
        self._task = loop.create_task(self._batch_loop(), name="hf-batcher")

    async def _batch_loop(self) -> None:
        loop = asyncio.get_running_loop()
        queue = self._queue
        pending: list[_Request] = []
        while True:
            if not pending:
                pending.append(await queue.get())
            deadline = loop.time() + self.batch_wait_s
            while True:
                while not queue.empty():
                    pending.append(queue.get_nowait())
                key = pending[0].key
                if sum(r.key == key for r in pending) >= self.batch_size:
                    break
                remaining = deadline - loop.time()
                if remaining <= 0:
                    break
                try:
                    pending.append(await asyncio.wait_for(queue.get(), remaining))
                except asyncio.TimeoutError:
                    break
            key = pending[0].key
            batch = [r for r in pending if r.key == key][: self.batch_size]
            chosen = {id(r) for r in batch}
            pending = [r for r in pending if id(r) not in chosen]
            batch = [r for r in batch if not r.future.done()]  # callers that gave up
            if not batch:
                continue
            try:
                results = await loop.run_in_executor(self._executor, self._generate, batch)
            except Exception as exc:  # the worker itself failed: the pages fail, the engine goes on
                log.exception("hf generate failed")
                results = [_Generated(error=f"generation failed: {type(exc).__name__}: {exc}")] * len(batch)
            for request, result in zip(batch, results):
                if not request.future.done():
                    request.future.set_result(result)

    # ---- generation (worker thread) --------------------------------------------------------------

    def prepare(self, images: list[Image.Image]) -> dict:
        """Model inputs for a batch of page images: chat template, expanded image tokens, left padding."""
        messages = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": self.profile.prompt}]}]
        text = self.tokenizer.apply_chat_template(
            messages, chat_template=self.chat_template, tokenize=False, add_generation_prompt=True
        )
        if text.count(IMAGE_TOKEN) != 1:
            raise ValueError(f"the chat template wrote {text.count(IMAGE_TOKEN)} image placeholders, expected 1")
        vision = self.image_processor(images=images, return_tensors="pt")
        grid = vision["image_grid_thw"]
        texts = []
        for i in range(len(images)):
            n = int(grid[i].prod()) // (self.merge_size ** 2)
            texts.append(text.replace(IMAGE_TOKEN, IMAGE_TOKEN * n))
        tokens = self.tokenizer(texts, padding=True, return_tensors="pt", add_special_tokens=False)
        inputs = {"input_ids": tokens["input_ids"], "attention_mask": tokens["attention_mask"], **vision}
        if "mm_token_type_ids" in self._forward_takes:
            inputs["mm_token_type_ids"] = (tokens["input_ids"] == self.image_token_id).long()
        return inputs

    def to_device(self, inputs: dict) -> dict:
        """prepare()'s tensors on the model's device, the image in the model's dtype."""
        inputs = {k: v.to(self.device) for k, v in inputs.items()}
        inputs["pixel_values"] = inputs["pixel_values"].to(self.dtype)
        return inputs

    def _generation_config(self, sampling: Sampling, n_tokens: int):
        from transformers import GenerationConfig

        kwargs: dict[str, Any] = dict(max_new_tokens=n_tokens, eos_token_id=self.eos_ids, pad_token_id=self.pad_id)
        if sampling.temperature > 0:
            kwargs.update(do_sample=True, temperature=sampling.temperature, top_p=sampling.top_p)
        else:
            kwargs.update(do_sample=False)
        if self.ignore_eos:
            kwargs["min_new_tokens"] = n_tokens
        if self.static_cache:
            kwargs["cache_implementation"] = "static"
        return GenerationConfig(**kwargs)

    def _generate(self, batch: list[_Request]) -> list[_Generated]:
        """The batch's answers, in order. A batch that runs out of memory is run again in halves (the
        engine keeps the smaller batch size), down to single pages; a single page that does not fit
        fails alone."""
        results: list[_Generated] = []
        oom: dict[int, list[int]] = {}  # id(request) -> sizes of the batches that ran out of memory
        todo, size = list(batch), len(batch)
        while todo:
            chunk, todo = todo[:size], todo[size:]
            try:
                done = self._generate_batch(chunk)
            except _OutOfMemory:
                self._free_memory()
                n = len(chunk)
                for r in chunk:
                    oom.setdefault(id(r), []).append(n)
                    if r.restart is not None:  # an empty delta, if any text of this attempt went out
                        r.restart()
                if n == 1:
                    done = [_Generated(error=self._single_page_oom(chunk[0]), batch=1)]
                else:
                    size = n // 2  # n >= 2 here
                    self.batch_size = min(self.batch_size, size)
                    log.warning("hf engine: out of memory at batch size %d; running those pages again %d at a "
                                "time (batch size now %d)", n, size, self.batch_size)
                    todo = chunk + todo
                    continue
            for r, gen in zip(chunk, done):
                gen.oom = oom.get(id(r))
            results += done
        return results

    def _generate_batch(self, batch: list[_Request]) -> list[_Generated]:
        """One generate() call; raises _OutOfMemory when the batch does not fit."""
        torch = self._torch
        n = len(batch)
        n_tokens = batch[0].sampling.max_tokens
        try:
            inputs = self.to_device(self.prepare([r.image for r in batch]))
            sinks = [r.sink for r in batch]
            streamer = _BatchStreamer(self.tokenizer, sinks, set(self.eos_ids)) if any(sinks) else None
            with torch.inference_mode():
                out = self.model.generate(
                    **inputs, generation_config=self._generation_config(batch[0].sampling, n_tokens), streamer=streamer
                )
        except Exception as exc:
            if _is_oom(torch, exc):
                raise _OutOfMemory() from exc
            log.exception("hf generate failed for a batch of %d", n)
            return [_Generated(error=f"generation failed: {type(exc).__name__}: {exc}", batch=n) for _ in batch]
        prompt_len = inputs["input_ids"].shape[1]
        prompt_tokens = inputs["attention_mask"].sum(dim=1).tolist()
        eos = set(self.eos_ids)
        results = []
        for i, row in enumerate(out[:, prompt_len:].tolist()):
            end = next((j for j, tok in enumerate(row) if tok in eos), None)
            toks = row if end is None else row[:end]
            text = self.tokenizer.decode(toks, skip_special_tokens=True, clean_up_tokenization_spaces=False)
            results.append(_Generated(
                text=text, prompt_tokens=int(prompt_tokens[i]),
                completion_tokens=len(toks) + (0 if end is None else 1),
                finish_reason="stop" if end is not None else "length", batch=n,
            ))
        return results

    def _free_memory(self) -> None:
        torch = self._torch
        if self.device.startswith("cuda"):
            torch.cuda.empty_cache()
        elif self.device == "mps":
            torch.mps.empty_cache()

    def _single_page_oom(self, request: _Request) -> str:
        w, h = request.image.size
        return (f"out of memory on {self.device} generating a single page (batch size 1, page image {w}x{h} px, "
                f"max_tokens={request.sampling.max_tokens}): the page does not fit; use a smaller page image "
                "(profile max_pixels), a lower max_tokens or a device with more memory")


class _OutOfMemory(Exception):
    """generate() ran out of memory for a batch."""


class _Deltas:
    """A page's delta callback fed from the worker thread, in order.

    As in the openai engine: pieces as they are generated; before a retried attempt's pieces, an
    empty delta ("discard the text so far, the answer starts over") if the last attempt sent any.
    A failing callback gets no more deltas and does not fail the page.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop, cb: DeltaCallback):
        self.loop = loop
        self.cb: DeltaCallback | None = cb
        self.queue: asyncio.Queue = asyncio.Queue()
        self.sent = False
        self.task = loop.create_task(self._pump())

    def sink(self, text: str) -> None:
        """Called from the worker thread."""
        self.loop.call_soon_threadsafe(self._put, text)

    def restart(self) -> None:
        """Called from the worker thread: the attempt's text so far is void (after the pieces already sent)."""
        self.loop.call_soon_threadsafe(self.reset)

    def _put(self, text: str) -> None:
        self.sent = True
        self.queue.put_nowait(text)

    def reset(self) -> None:
        if self.sent:
            self.queue.put_nowait("")
            self.sent = False

    async def close(self) -> None:
        self.queue.put_nowait(None)  # after every piece the worker scheduled before the result
        await self.task

    async def _pump(self) -> None:
        while (piece := await self.queue.get()) is not None:
            if self.cb is None:
                continue
            try:
                out = self.cb(piece)
                if inspect.isawaitable(out):
                    await out
            except Exception:
                log.exception("on_delta callback failed; no more deltas for this page")
                self.cb = None


def _is_oom(torch, exc: BaseException) -> bool:
    if isinstance(exc, torch.OutOfMemoryError):
        return True
    return isinstance(exc, RuntimeError) and "out of memory" in str(exc).lower()


def _as_list(value) -> list[int]:
    if value is None:
        return []
    if isinstance(value, (list, tuple)):
        return [int(v) for v in value]
    return [int(value)]


def _read_chat_template(folder: Path) -> str | None:
    jinja = folder / "chat_template.jinja"
    if jinja.is_file():
        return jinja.read_text(encoding="utf-8")
    js = folder / "chat_template.json"
    if js.is_file():
        data = json.loads(js.read_text(encoding="utf-8"))
        return data.get("chat_template") if isinstance(data, dict) else None
    return None
