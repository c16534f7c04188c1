"""Generation for the hf engine, in its worker thread: a batch of page images -> model inputs
(chat template, expanded image tokens, left padding) -> one generate() call -> decoded answers, text
streamed per sequence as it comes; a batch that runs out of memory is run again in halves."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from PIL import Image

from ocrserve.engines.hf_load import IMAGE_TOKEN
from ocrserve.profiles import Profile, Sampling

log = logging.getLogger("ocrserve.engines.hf")


@dataclass
class Generated:
    """One sequence of a batch, decoded."""

    text: str = ""
    prompt_tokens: int = 0
    completion_tokens: int = 0
    finish_reason: str = "error"  # stop, length, error
    error: str | None = None
    batch: int = 0  # pages in the generate() call that made it
    oom: list[int] | None = None  # sizes of the batches with this page that ran out of memory first


@dataclass
class Request:
    image: Image.Image
    sampling: Sampling
    future: asyncio.Future
    sink: Callable[[str], None] | None = None  # called from the worker thread with text deltas
    restart: Callable[[], None] | None = None  # called from the worker thread: the answer starts over

    @property
    def key(self) -> tuple:
        s = self.sampling
        return (s.temperature, s.top_p, s.max_tokens)


class BatchStreamer:
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
        delta = text[self.printed[i] :]
        sink = self.sinks[i]
        if delta and sink is not None:  # a row without a sink is done from the start: never emitted
            sink(delta)
        self.printed[i] = len(text)
        if text.endswith("\n") or len(self.cache[i]) >= self.window:
            self.cache[i] = []
            self.printed[i] = 0


class HFGeneration:
    """The generation half of HFEngine (a mixin: the model, tokenizer and settings are the engine's)."""

    # Set by HFEngine (its __init__ and _load). torch and transformers objects are typed Any: torch is
    # imported lazily and their stubs say little.
    profile: Profile
    device: str  # 'cuda', 'cuda:N', 'mps' or 'cpu'
    dtype: Any  # a torch.dtype
    batch_size: int
    ignore_eos: bool
    static_cache: bool
    tokenizer: Any
    image_processor: Any
    chat_template: str | None
    image_token_id: int
    merge_size: int
    model: Any
    eos_ids: list[int]
    pad_id: int
    _forward_takes: set[str]
    _torch: Any  # the torch module

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
            n = int(grid[i].prod()) // (self.merge_size**2)
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

        kwargs: dict[str, Any] = {"max_new_tokens": n_tokens, "eos_token_id": self.eos_ids, "pad_token_id": self.pad_id}
        if sampling.temperature > 0:
            kwargs.update(do_sample=True, temperature=sampling.temperature, top_p=sampling.top_p)
        else:
            kwargs.update(do_sample=False)
        if self.ignore_eos:
            kwargs["min_new_tokens"] = n_tokens
        if self.static_cache:
            kwargs["cache_implementation"] = "static"
        return GenerationConfig(**kwargs)

    def _generate(self, batch: list[Request]) -> list[Generated]:
        """The batch's answers, in order. A batch that runs out of memory is run again in halves (the
        engine keeps the smaller batch size), down to single pages; a single page that does not fit
        fails alone."""
        results: list[Generated] = []
        oom: dict[int, list[int]] = {}  # id(request) -> sizes of the batches that ran out of memory
        todo, size = list(batch), len(batch)
        while todo:
            chunk, todo = todo[:size], todo[size:]
            try:
                done = self._generate_batch(chunk)
            except OutOfMemory:
                self._free_memory()
                n = len(chunk)
                for r in chunk:
                    oom.setdefault(id(r), []).append(n)
                    if r.restart is not None:  # an empty delta, if any text of this attempt went out
                        r.restart()
                if n == 1:
                    done = [Generated(error=self._single_page_oom(chunk[0]), batch=1)]
                else:
                    size = n // 2  # n >= 2 here
                    self.batch_size = min(self.batch_size, size)
                    log.warning(
                        "hf engine: out of memory at batch size %d; running those pages again %d at a "
                        "time (batch size now %d)",
                        n,
                        size,
                        self.batch_size,
                    )
                    todo = chunk + todo
                    continue
            for r, gen in zip(chunk, done):
                gen.oom = oom.get(id(r))
            results += done
        return results

    def _generate_batch(self, batch: list[Request]) -> list[Generated]:
        """One generate() call; raises OutOfMemory when the batch does not fit."""
        torch = self._torch
        n = len(batch)
        n_tokens = batch[0].sampling.max_tokens
        try:
            inputs = self.to_device(self.prepare([r.image for r in batch]))
            sinks = [r.sink for r in batch]
            streamer = BatchStreamer(self.tokenizer, sinks, set(self.eos_ids)) if any(sinks) else None
            with torch.inference_mode():
                out = self.model.generate(
                    **inputs, generation_config=self._generation_config(batch[0].sampling, n_tokens), streamer=streamer
                )
        except Exception as exc:
            if _is_oom(torch, exc):
                raise OutOfMemory() from exc
            log.exception("hf generate failed for a batch of %d", n)
            return [Generated(error=f"generation failed: {type(exc).__name__}: {exc}", batch=n) for _ in batch]
        prompt_len = inputs["input_ids"].shape[1]
        prompt_tokens = inputs["attention_mask"].sum(dim=1).tolist()
        eos = set(self.eos_ids)
        results = []
        for i, row in enumerate(out[:, prompt_len:].tolist()):
            end = next((j for j, tok in enumerate(row) if tok in eos), None)
            toks = row if end is None else row[:end]
            text = self.tokenizer.decode(toks, skip_special_tokens=True, clean_up_tokenization_spaces=False)
            results.append(
                Generated(
                    text=text,
                    prompt_tokens=int(prompt_tokens[i]),
                    completion_tokens=len(toks) + (0 if end is None else 1),
                    finish_reason="stop" if end is not None else "length",
                    batch=n,
                )
            )
        return results

    def _free_memory(self) -> None:
        torch = self._torch
        if self.device.startswith("cuda"):
            torch.cuda.empty_cache()
        elif self.device == "mps":
            torch.mps.empty_cache()

    def _single_page_oom(self, request: Request) -> str:
        w, h = request.image.size
        return (
            f"out of memory on {self.device} generating a single page (batch size 1, page image {w}x{h} px, "
            f"max_tokens={request.sampling.max_tokens}): the page does not fit; use a smaller page image "
            "(profile max_pixels), a lower max_tokens or a device with more memory"
        )


class OutOfMemory(Exception):
    """generate() ran out of memory for a batch."""


def _is_oom(torch, exc: BaseException) -> bool:
    if isinstance(exc, torch.OutOfMemoryError):
        return True
    return isinstance(exc, RuntimeError) and "out of memory" in str(exc).lower()
