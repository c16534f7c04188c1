"""Engine `vllm` for Ray actors: vLLM in-process (vllm.LLM), one engine per GPU, whole batches at once.

The Ray engine stage hands a batch of pages to `ocr_batch`; they go to `LLM.chat` in one call, so
vLLM's scheduler batches them on the GPU. Requests are what the `openai` engine sends a vLLM server
(engines/chat.py): one user turn, the page PNG as a data URL first, then the profile's prompt, the profile's sampling.

Retries as the other engines (engines/policy.py): pages whose answer loops or is cut off at max_tokens go again (as
one smaller batch) with the profile's retry sampling, up to `profile.max_retries` rounds, then fail
with ok=False. If vLLM raises on a batch, its pages are tried one by one so a bad page fails alone.
Needs the `vllm` extra on the GPU nodes; `llm` and `sampling_factory` can be injected (tests).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any

from pydantic import Field

from ocrserve.engines import chat
from ocrserve.engines.base import Engine, EngineResult, GenerationOptions, PageInput
from ocrserve.engines.policy import Ladder
from ocrserve.engines.registry import register_engine
from ocrserve.profiles import Profile, Sampling, load_profile

log = logging.getLogger(__name__)


def _sampling_params(**kw: Any) -> Any:
    from vllm import SamplingParams

    return SamplingParams(**kw)


class VLLMOptions(GenerationOptions):
    """The vllm engine's options."""

    checkpoint: str | None = Field(None, description="Hub id or local folder (unset: the profile's checkpoint)")
    max_model_len: int | None = Field(None, ge=1, description="vLLM's context length (unset: the model's)")
    gpu_memory_utilization: float = Field(0.9, gt=0, le=1, description="share of the GPU's memory vLLM may take")
    llm_kwargs: dict[str, Any] = Field(default_factory=dict, description="more vllm.LLM arguments")
    llm: Any = Field(None, description="a vllm.LLM to use (tests; unset: one is made)")
    sampling_factory: Callable[..., Any] | None = Field(
        None, description="makes the sampling parameters (tests; unset: vllm.SamplingParams)"
    )


@register_engine
class VLLMEngine(Engine):
    name = "vllm"
    Options = VLLMOptions
    batched = True  # whole batches to LLM.chat: the Ray stage hands it batches
    needs_gpu = True
    ray_batch_size = 64

    def __init__(self, profile: Profile | str | None, options: VLLMOptions | None = None, **values: Any) -> None:
        o: VLLMOptions = self.options_of(options, values)
        self.profile = load_profile(profile)
        self.max_tokens = o.max_tokens
        self.max_retries = o.max_retries
        self.ignore_eos = o.ignore_eos  # benchmarks: every page generates max_tokens, nothing is judged or retried
        self._sampling = o.sampling_factory or _sampling_params
        self._prompt = self.profile.prompt
        self._lock = asyncio.Lock()
        llm = o.llm
        if llm is None:
            from vllm import LLM

            kw = {
                "model": o.checkpoint or self.profile.checkpoint,
                "gpu_memory_utilization": o.gpu_memory_utilization,
                "limit_mm_per_prompt": {"image": 1},
                "trust_remote_code": True,
            }
            if o.max_model_len:
                kw["max_model_len"] = o.max_model_len
            kw.update(o.llm_kwargs)
            llm = LLM(**kw)
        self.llm = llm

    def capacity(self) -> int:
        return 256

    async def aclose(self) -> None:
        self.llm = None

    async def ocr(self, page: PageInput, *, on_delta=None) -> EngineResult:
        return (await self.ocr_batch([page]))[0]

    async def ocr_batch(self, pages: list[PageInput]) -> list[EngineResult]:
        async with self._lock:  # one generate call at a time on this GPU; vLLM batches inside it
            return await asyncio.to_thread(self.run_batch, pages)

    # -- the blocking part -------------------------------------------------------------------
    def _messages(self, page: PageInput) -> list[dict[str, Any]]:
        return chat.messages(chat.data_url(page.png_bytes()), self._prompt)

    def _params(self, s: Sampling) -> Any:
        kw = {"ignore_eos": True} if self.ignore_eos else {}
        return self._sampling(
            temperature=s.temperature, top_p=s.top_p, max_tokens=self.max_tokens or s.max_tokens, **kw
        )

    def _generate(self, convs: list[list[dict]], s: Sampling) -> list[Any]:
        return list(self.llm.chat(convs, sampling_params=self._params(s), use_tqdm=False))

    def _generate_isolated(self, convs: list[list[dict]], s: Sampling) -> list[Any]:
        """One call for the batch; when it raises, one call per page (an exception object for a bad page)."""
        try:
            outs = self._generate(convs, s)
            if len(outs) != len(convs):
                raise RuntimeError(f"vLLM answered {len(outs)} outputs for {len(convs)} requests")
            return outs
        except Exception as e:  # noqa: BLE001
            if len(convs) == 1:
                return [e]
            log.warning("vLLM batch of %d failed (%s); trying its pages one by one", len(convs), e)
            return [self._generate_isolated([c], s)[0] for c in convs]

    def run_batch(self, pages: list[PageInput]) -> list[EngineResult]:
        t0 = time.perf_counter()
        n = len(pages)
        results: list[EngineResult | None] = [None] * n
        ladders = [
            Ladder(self.name, self.profile, ignore_eos=self.ignore_eos, max_retries=self.max_retries) for _ in range(n)
        ]
        convs: dict[int, list[dict]] = {}  # the conversation of each page that could be encoded
        for i, p in enumerate(pages):
            try:
                convs[i] = self._messages(p)
            except Exception as e:  # noqa: BLE001 - a page we cannot encode fails alone
                results[i] = ladders[i].failed(f"cannot encode the page image: {e}")
        todo = [i for i in range(n) if results[i] is None]
        sampling = self.profile.sampling
        while todo:
            max_tokens = self.max_tokens or sampling.max_tokens
            outs = self._generate_isolated([convs[i] for i in todo], sampling)
            retry: list[int] = []
            for i, out in zip(todo, outs):
                ladder = ladders[i]
                ladder.begin()
                if isinstance(out, Exception):
                    results[i] = ladder.failed(f"vLLM error: {out}")
                    continue
                comp = out.outputs[0]
                text, finish = comp.text, comp.finish_reason
                ptoks = len(out.prompt_token_ids) if getattr(out, "prompt_token_ids", None) is not None else None
                ctoks = len(comp.token_ids) if getattr(comp, "token_ids", None) is not None else None
                verdict = ladder.judge(text, finish, max_tokens)
                if verdict == "ok":
                    results[i] = ladder.answer(text, finish, ptoks, ctoks)
                elif verdict == "give_up":
                    results[i] = ladder.gave_up(text, ptoks, ctoks)
                else:
                    retry.append(i)
            todo = retry
            sampling = self.profile.retry_sampling  # every page retried has had one unusable answer
        dt = time.perf_counter() - t0
        answers: list[EngineResult] = []
        for r in results:
            assert r is not None
            r.elapsed_s = dt
            answers.append(r)
        return answers
