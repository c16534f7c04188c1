"""Engine `vllm` for Ray actors: vLLM in-process (vllm.LLM), one engine per GPU, whole batches at once.

The Ray engine stage hands a batch of pages to `ocr_batch`; they go to `LLM.chat` in one call, so
vLLM's scheduler batches them on the GPU. Requests are what the `openai` engine sends a vLLM server:
one user turn, the page PNG as a data URL first, then the profile's prompt, the profile's sampling.

Retries as the other engines: pages whose answer loops or is cut off at max_tokens go again (as
one smaller batch) with the profile's retry sampling, up to `profile.max_retries` rounds, then fail
with ok=False. If vLLM raises on a batch, its pages are tried one by one so a bad page fails alone.
Needs the `vllm` extra on the GPU nodes; `llm` and `sampling_factory` can be injected (tests).
"""

from __future__ import annotations

import asyncio
import base64
import logging
import time
from typing import Any, Callable

from ocrserve.parse import is_repetition_loop
from ocrserve.profiles import Profile, Sampling, load_profile
from ocrserve.engines.base import EngineResult, PageInput

log = logging.getLogger(__name__)


def _sampling_params(**kw: Any) -> Any:
    from vllm import SamplingParams

    return SamplingParams(**kw)


class VLLMEngine:
    name = "vllm"

    def __init__(
        self,
        profile: Profile | str | None,
        settings=None,
        *,
        llm: Any = None,
        checkpoint: str | None = None,
        max_model_len: int | None = None,
        gpu_memory_utilization: float = 0.9,
        max_tokens: int | None = None,
        sampling_factory: Callable[..., Any] | None = None,
        llm_kwargs: dict[str, Any] | None = None,
        **_: Any,
    ) -> None:
        self.profile = load_profile(profile)
        self.max_tokens = max_tokens
        self._sampling = sampling_factory or _sampling_params
        self._prompt = self.profile.prompt
        self._lock = asyncio.Lock()
        if llm is None:
            from vllm import LLM

            kw = dict(model=checkpoint or self.profile.checkpoint, gpu_memory_utilization=gpu_memory_utilization,
                      limit_mm_per_prompt={"image": 1}, trust_remote_code=True)
            if max_model_len:
                kw["max_model_len"] = max_model_len
            kw.update(llm_kwargs or {})
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
        data = page.png_bytes()
        mime = "image/jpeg" if data[:2] == b"\xff\xd8" else "image/png"
        url = f"data:{mime};base64,{base64.b64encode(data).decode('ascii')}"
        return [{"role": "user", "content": [
            {"type": "image_url", "image_url": {"url": url}},
            {"type": "text", "text": self._prompt},
        ]}]

    def _params(self, s: Sampling) -> Any:
        return self._sampling(temperature=s.temperature, top_p=s.top_p, max_tokens=self.max_tokens or s.max_tokens)

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
        attempts = [0] * n
        problems: list[list[str]] = [[] for _ in range(n)]
        convs: list[list[dict] | None] = [None] * n
        for i, p in enumerate(pages):
            try:
                convs[i] = self._messages(p)
            except Exception as e:  # noqa: BLE001 - a page we cannot encode fails alone
                results[i] = EngineResult(ok=False, engine=self.name, finish_reason="error",
                                          error=f"cannot encode the page image: {e}")
        todo = [i for i in range(n) if results[i] is None]
        sampling = self.profile.sampling
        rnd = 0
        while todo:
            outs = self._generate_isolated([convs[i] for i in todo], sampling)
            retry: list[int] = []
            for i, out in zip(todo, outs):
                attempts[i] += 1
                if isinstance(out, Exception):
                    results[i] = EngineResult(ok=False, engine=self.name, attempts=attempts[i], finish_reason="error",
                                              error=f"vLLM error: {out}")
                    continue
                comp = out.outputs[0]
                text, finish = comp.text, comp.finish_reason
                ptoks = len(out.prompt_token_ids) if getattr(out, "prompt_token_ids", None) is not None else None
                ctoks = len(comp.token_ids) if getattr(comp, "token_ids", None) is not None else None
                looped = is_repetition_loop(text)
                cut = finish == "length"
                if looped or cut:
                    what = ("the answer ended in a repetition loop" if looped
                            else "the answer was cut off at max_tokens (finish_reason length)")
                    problems[i].append(what)
                    if rnd >= self.profile.max_retries:
                        results[i] = EngineResult(
                            ok=False, engine=self.name, attempts=attempts[i], finish_reason="loop" if looped else "length",
                            prompt_tokens=ptoks, completion_tokens=ctoks,
                            error=f"gave up after {attempts[i]} attempts ({len(problems[i])} answers unusable); last: {what}",
                            extra={"last_raw": text, "problems": list(problems[i])},
                        )
                    else:
                        retry.append(i)
                    continue
                extra: dict[str, Any] = {}
                if problems[i]:
                    extra = {"problems": list(problems[i]), "retry_sampling": True}
                results[i] = EngineResult(ok=True, raw=text, engine=self.name, attempts=attempts[i], finish_reason=finish,
                                          prompt_tokens=ptoks, completion_tokens=ctoks,
                                          error=problems[i][-1] if problems[i] else None, extra=extra)
            todo = retry
            sampling = self.profile.retry_sampling
            rnd += 1
        dt = time.perf_counter() - t0
        out: list[EngineResult] = []
        for r in results:
            assert r is not None
            r.elapsed_s = dt
            out.append(r)
        return out
