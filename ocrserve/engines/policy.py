"""The engines' retry ladder for one page, written once.

An answer that ends in a repetition loop, or is cut off at max_tokens, is unusable: the page goes
again with the profile's retry sampling, up to `profile.max_retries` times; then the engine gives
up (ok=False, the last answer in `extra["last_raw"]`) and the pipeline hands the page to the
fallback. `ignore_eos` (benchmarks: a fixed output length) judges nothing.

Every result carries the problems met on the way (`extra["problems"]`, the last in `error` for a
page that still came out well) and, after any problem, whether the retry sampling made the answer
(`extra["retry_sampling"]`). Engines add their own problems (a failed request) with `note`.
"""

from __future__ import annotations

import time
from typing import Any, Literal

from ocrserve.engines.base import EngineResult
from ocrserve.parse import is_repetition_loop
from ocrserve.profiles import Profile, Sampling

LOOP = "the answer ended in a repetition loop"

Verdict = Literal["ok", "retry", "give_up"]


def cut_off(max_tokens: int | None) -> str:
    return f"the answer was cut off at max_tokens={max_tokens} (finish_reason length)"


class Ladder:
    """One page's attempts: the sampling for the next one, the verdict on an answer, the result."""

    def __init__(self, engine: str, profile: Profile, *, ignore_eos: bool = False) -> None:
        self.engine = engine
        self.profile = profile
        self.ignore_eos = ignore_eos
        self.t0 = time.perf_counter()
        self.attempts = 0            # every attempt, failed requests included
        self.unusable = 0            # answers that looped or were cut off
        self.problems: list[str] = []
        self.looped = False          # the last unusable answer looped (else it was cut off)
        self.extra: dict[str, Any] = {}  # the engine's own fields, on every result

    def sampling(self, max_tokens: int | None = None) -> Sampling:
        """The sampling for the next attempt: the profile's, its retry sampling after an unusable answer;
        `max_tokens` overrides the profile's limit."""
        s = self.profile.retry_sampling if self.unusable else self.profile.sampling
        return s.model_copy(update={"max_tokens": max_tokens}) if max_tokens else s

    def begin(self) -> int:
        """An attempt starts; its number (from 1)."""
        self.attempts += 1
        return self.attempts

    def note(self, problem: str) -> None:
        """A problem the engine met and retries itself (a failed request)."""
        self.problems.append(problem)

    def judge(self, text: str, finish_reason: str | None, max_tokens: int | None) -> Verdict:
        """ok (use the answer), retry (with `sampling()`), or give_up (then `gave_up(...)`)."""
        if self.ignore_eos:
            return "ok"
        self.looped = is_repetition_loop(text)
        if not (self.looped or finish_reason == "length"):
            return "ok"
        self.problems.append(LOOP if self.looped else cut_off(max_tokens))
        self.unusable += 1
        return "give_up" if self.unusable > self.profile.max_retries else "retry"

    @property
    def last_problem(self) -> str | None:
        return self.problems[-1] if self.problems else None

    # ---- results ------------------------------------------------------------------------------

    def result(self, **kw: Any) -> EngineResult:
        extra = {k: list(v) if isinstance(v, list) else v for k, v in self.extra.items()}
        extra.update(kw.pop("extra", {}))
        if self.problems:
            extra["problems"] = list(self.problems)
        return EngineResult(engine=self.engine, attempts=self.attempts, elapsed_s=time.perf_counter() - self.t0,
                            extra=extra, **kw)

    def answer(self, raw: str, finish_reason: str | None, prompt_tokens: int | None = None,
               completion_tokens: int | None = None) -> EngineResult:
        """The page came out well (after the problems so far, if any)."""
        return self.result(ok=True, raw=raw, finish_reason=finish_reason, prompt_tokens=prompt_tokens,
                           completion_tokens=completion_tokens, error=self.last_problem,
                           extra={"retry_sampling": self.unusable > 0} if self.problems else {})

    def gave_up(self, last_raw: str, prompt_tokens: int | None = None,
                completion_tokens: int | None = None) -> EngineResult:
        """Every answer was unusable: ok=False, the last answer in extra["last_raw"]."""
        return self.result(ok=False, raw="", finish_reason="loop" if self.looped else "length",
                           prompt_tokens=prompt_tokens, completion_tokens=completion_tokens,
                           error=f"gave up after {self.attempts} attempts ({self.unusable} answers unusable); "
                                 f"last: {self.last_problem}",
                           extra={"last_raw": last_raw})

    def failed(self, error: str) -> EngineResult:
        """The page failed for another reason (a request no retry fixes, a bad image, an engine error)."""
        return self.result(ok=False, raw="", finish_reason="error", error=error)
