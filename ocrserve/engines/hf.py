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
insists on a video processor, which needs torchvision, and the engine only ever sends images. An
answer ends at the generation config's end-of-sequence ids or `<|im_end|>` (hf_load.stop_token_ids).
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from PIL import Image
from pydantic import Field

from ocrserve.engines.base import DeltaCallback, Engine, EngineError, EngineResult, GenerationOptions, PageInput
from ocrserve.engines.deltas import ThreadDeltas
from ocrserve.engines.hf_generate import Generated, HFGeneration, Request
from ocrserve.engines.hf_load import (
    IMAGE_TOKEN,
    import_torch,
    model_class,
    read_chat_template,
    resolve_checkpoint,
    resolve_device,
    resolve_dtype,
    stop_token_ids,
)
from ocrserve.engines.policy import Ladder
from ocrserve.engines.registry import register_engine
from ocrserve.profiles import Profile, Sampling, load_profile

log = logging.getLogger(__name__)


class HFOptions(GenerationOptions):
    """The hf engine's options."""

    checkpoint: str | None = Field(None, description="Hub id or local folder (unset: the profile's checkpoint)")
    device: str | None = Field(None, description="cuda, cuda:N, mps, cpu or auto (unset: auto)")
    dtype: Any = Field(None, description="bf16, fp16 or fp32 (or a torch dtype; unset: by device)")
    batch_size: int = Field(8, ge=1, description="pages per generate() call")
    batch_wait_ms: float = Field(5.0, ge=0, description="how long an idle engine waits for more pages to batch")
    random_weights: bool = Field(
        False,
        description="benchmarks: weights drawn at random from the config (none "
        "on disk, like vLLM's --load-format dummy)",
    )
    static_cache: bool = Field(
        False,
        description="a preallocated KV cache, with which transformers compiles the "
        "decoding step on CUDA (torch.compile; the first batch of each size compiles)",
    )


@register_engine
class HFEngine(HFGeneration, Engine):
    """A Chandra model run in-process with transformers on CUDA, MPS or CPU."""

    name = "hf"
    Options = HFOptions
    needs_gpu = True

    def __init__(self, profile: Profile, options: HFOptions | None = None, **values: Any) -> None:
        """Options: HFOptions (checkpoint, device, dtype, batch_size, ...), or the same as keywords."""
        o: HFOptions = self.options_of(options, values)
        batch_size, random_weights = o.batch_size, o.random_weights
        torch = import_torch()
        self.profile = load_profile(profile)
        self.checkpoint = o.checkpoint or self.profile.checkpoint
        self.device = resolve_device(o.device)
        self.dtype = resolve_dtype(o.dtype, self.device)
        self.batch_size = batch_size
        self.max_tokens = o.max_tokens
        self.max_retries = o.max_retries
        self.batch_wait_s = o.batch_wait_ms / 1000.0
        self.ignore_eos = o.ignore_eos
        self.static_cache = o.static_cache
        self._torch = torch

        folder = resolve_checkpoint(self.checkpoint)
        t0 = time.perf_counter()
        self._load(folder, random_weights)
        log.info(
            "hf engine: %s (%s) on %s as %s, batch size %d, loaded in %.1f s",
            self.checkpoint,
            self.model_type,
            self.device,
            str(self.dtype).removeprefix("torch."),
            batch_size,
            time.perf_counter() - t0,
        )
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="hf-generate")
        self._loop: asyncio.AbstractEventLoop | None = None
        self._queue: asyncio.Queue[Request] | None = None
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
                self.checkpoint,
                self.model_type,
                self.profile.name,
                self.profile.architecture,
            )
        cls = model_class(self.model_type)
        try:
            self.tokenizer = AutoTokenizer.from_pretrained(folder)
            self.image_processor = AutoImageProcessor.from_pretrained(folder)
        except (OSError, ValueError) as exc:
            raise EngineError(
                f"checkpoint {self.checkpoint!r}: cannot load its tokenizer or image processor ({exc})"
            ) from exc
        self.tokenizer.padding_side = "left"
        self.chat_template = self.tokenizer.chat_template or read_chat_template(folder)
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
            raise EngineError(
                f"checkpoint {self.checkpoint!r} does not fit in {self.device} memory as {self.dtype}"
            ) from exc
        except (OSError, ValueError) as exc:
            raise EngineError(f"checkpoint {self.checkpoint!r}: cannot load the model ({exc})") from exc
        self.model = model.eval()
        self._forward_takes = set(inspect.signature(self.model.forward).parameters)

        gen = getattr(self.model, "generation_config", None)
        self.eos_ids = stop_token_ids(gen, self.tokenizer)  # with <|im_end|>, as chandra-ocr 0.2.0
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
            except (asyncio.CancelledError, Exception):  # noqa: BLE001 - shutting down: its end is all we wait for
                pass
        self._task = None
        self._executor.shutdown(wait=True)

    async def ocr(self, page: PageInput, *, on_delta: DeltaCallback | None = None) -> EngineResult:
        ladder = Ladder(self.name, self.profile, ignore_eos=self.ignore_eos, max_retries=self.max_retries)
        completions: list[int] = []
        batches: list[int] = []
        oom: list[int] = []
        ladder.extra.update(completion_tokens_per_attempt=completions, batch_sizes=batches)
        try:
            image = page.image.convert("RGB")
        except Exception as exc:  # noqa: BLE001 - a page we cannot even decode fails, never raises
            return ladder.failed(f"cannot read the page image: {exc}")
        deltas = ThreadDeltas(asyncio.get_running_loop(), on_delta) if on_delta is not None else None
        try:
            while True:
                ladder.begin()
                sampling = ladder.sampling(self.max_tokens)
                if deltas is not None:
                    deltas.reset_now()
                gen = await self._attempt(image, sampling, deltas)
                completions.append(gen.completion_tokens)
                batches.append(gen.batch)
                oom += gen.oom or []
                if oom:
                    ladder.extra["out_of_memory_at"] = oom
                if gen.error is not None:
                    return ladder.failed(gen.error)
                verdict = ladder.judge(gen.text, gen.finish_reason, sampling.max_tokens)
                if verdict == "ok":
                    return ladder.answer(gen.text, gen.finish_reason, gen.prompt_tokens, gen.completion_tokens)
                if verdict == "give_up":
                    return ladder.gave_up(gen.text, gen.prompt_tokens, gen.completion_tokens)
                log.info("page %s/%d: %s; retrying with retry sampling", page.doc_id, page.index, ladder.last_problem)
        finally:
            if deltas is not None:
                await deltas.close()

    # ---- batching --------------------------------------------------------------------------------

    async def _attempt(self, image: Image.Image, sampling: Sampling, deltas: ThreadDeltas | None) -> Generated:
        loop = asyncio.get_running_loop()
        queue = self._ensure_batcher(loop)
        request = Request(
            image=image,
            sampling=sampling,
            future=loop.create_future(),
            sink=deltas.sink if deltas is not None else None,
            restart=deltas.restart if deltas is not None else None,
        )
        queue.put_nowait(request)
        return await request.future

    def _ensure_batcher(self, loop: asyncio.AbstractEventLoop) -> asyncio.Queue[Request]:
        """The queue of this loop's batcher task, started when there is none (or it ended)."""
        if self._loop is loop and self._queue is not None and self._task is not None and not self._task.done():
            return self._queue
        self._loop = loop
        queue: asyncio.Queue[Request] = asyncio.Queue()
        self._queue = queue
        self._task = loop.create_task(self._batch_loop(queue), name="hf-batcher")
        return queue

    async def _batch_loop(self, queue: asyncio.Queue[Request]) -> None:
        loop = asyncio.get_running_loop()
        pending: list[Request] = []
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
                except TimeoutError:
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
                results = [Generated(error=f"generation failed: {type(exc).__name__}: {exc}")] * len(batch)
            for request, result in zip(batch, results):
                if not request.future.done():
                    request.future.set_result(result)
