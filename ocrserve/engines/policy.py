"""The engines' retry ladder for one page, written once; the same rules as Chandra's own client.

- An answer cut off at max_tokens is the page's answer (upstream keeps it too: a dense page's text is
  there): no retry at the same limit, the page is marked `truncated`. `--max-tokens` raises the limit.
- An answer that ends in a repetition loop goes again with the profile's retry sampling (Chandra 1:
  temperature 0.3; Chandra 2: 0.2, 0.4, 0.6, 0.8, ...; top_p 0.95), up to `profile.max_retries` times
  (`--max-retries` overrides it).
- After the last retry the model's answer is still kept (upstream keeps the last one): of all the
  looping answers, the one with the longest text before its loop, cut where the loop starts (one
  copy of the repeated unit kept). The result is ok with `finish_reason="loop"`; the pipeline then
  lets the fallback fill in only the parts of the page where the model gave nothing. A loop with no
  text before it (markup aside) leaves nothing to keep: ok=False, and the fallback takes the page.
- `ignore_eos` (benchmarks: a fixed output length) judges nothing.

Every result carries the problems met on the way (`extra["problems"]`, the last in `error` for a
page that still came out well) and, after any problem, whether the retry sampling made the answer
(`extra["retry_sampling"]`). Engines add their own problems (a failed request) with `note`.
"""

from __future__ import annotations

import re
import time
from typing import Any, Literal

from ocrserve.engines.base import EngineResult
from ocrserve.parse import is_repetition_loop, repetition_period
from ocrserve.profiles import Profile, Sampling

_TAGS = re.compile(r"<[^>]*>?")
LOOP = "the answer ended in a repetition loop"

Verdict = Literal["ok", "retry", "give_up"]


def cut_off(max_tokens: int | None) -> str:
    return (
        f"the answer was cut off at max_tokens={max_tokens} (finish_reason length); kept as it is "
        "(--max-tokens raises the limit)"
    )


def before_loop(text: str) -> tuple[str, str]:
    """(the text before its final repetition loop starts, one copy of the repeated unit)."""
    t = text.rstrip()
    p = repetition_period(t)
    if p is None:
        return text, ""
    end = len(t) - p
    while end - p >= 0 and t[end - p : end] == t[end : end + p]:
        end -= p
    while end > 0 and t[end - 1] == t[end - 1 + p]:  # the loop may start mid-unit
        end -= 1
    return t[:end], t[end : end + p]


def _has_text(html: str) -> bool:
    return bool(_TAGS.sub("", html).strip())


def usage(prompt_tokens: int | None, completion_tokens: int | None) -> dict[str, int | None]:
    """An answer's token counts, as a result's fields (None: not counted)."""
    return {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens}


class Ladder:
    """One page's attempts: the sampling for the next one, the verdict on an answer, the result."""

    def __init__(
        self, engine: str, profile: Profile, *, ignore_eos: bool = False, max_retries: int | None = None
    ) -> None:
        self.engine = engine
        self.profile = profile
        self.max_retries = profile.max_retries if max_retries is None else max_retries
        self.ignore_eos = ignore_eos
        self.t0 = time.perf_counter()
        self.attempts = 0  # every attempt, failed requests included
        self.unusable = 0  # answers that looped
        self.problems: list[str] = []
        self.best = ""  # the longest text before a loop, of the looping answers so far
        self.extra: dict[str, Any] = {}  # the engine's own fields, on every result

    def sampling(self, max_tokens: int | None = None) -> Sampling:
        """The sampling for the next attempt: the profile's, its retry sampling for retry n after a loop;
        `max_tokens` overrides the profile's limit."""
        s = self.profile.retry_sampling_for(self.unusable) if self.unusable else self.profile.sampling
        return s.model_copy(update={"max_tokens": max_tokens}) if max_tokens else s

    def begin(self) -> int:
        """An attempt starts; its number (from 1)."""
        self.attempts += 1
        return self.attempts

    def note(self, problem: str) -> None:
        """A problem the engine met and retries itself (a failed request)."""
        self.problems.append(problem)

    def judge(self, text: str, finish_reason: str | None, max_tokens: int | None) -> Verdict:
        """ok (use the answer: a cut-off one too), retry (with `sampling()`), or give_up (then `gave_up(...)`)."""
        if self.ignore_eos:
            return "ok"
        if not is_repetition_loop(text):
            if finish_reason == "length":
                self.problems.append(cut_off(max_tokens))
            return "ok"
        self.problems.append(LOOP)
        self.unusable += 1
        head, unit = before_loop(text)
        if _has_text(head) and len(head.strip()) > len(self.best.strip()):
            self.best = head + unit  # the text before the loop, and what it repeats once
        return "give_up" if self.unusable > self.max_retries else "retry"

    @property
    def last_problem(self) -> str | None:
        return self.problems[-1] if self.problems else None

    # ---- results ------------------------------------------------------------------------------

    def result(self, **kw: Any) -> EngineResult:
        extra = {k: list(v) if isinstance(v, list) else v for k, v in self.extra.items()}
        extra.update(kw.pop("extra", {}))
        if self.problems:
            extra["problems"] = list(self.problems)
        return EngineResult(
            engine=self.engine, attempts=self.attempts, elapsed_s=time.perf_counter() - self.t0, extra=extra, **kw
        )

    def answer(
        self,
        raw: str,
        finish_reason: str | None,
        prompt_tokens: int | None = None,
        completion_tokens: int | None = None,
    ) -> EngineResult:
        """The page's answer (after the problems so far, if any; a cut-off answer is one)."""
        return self.result(
            ok=True,
            raw=raw,
            finish_reason=finish_reason,
            error=self.last_problem,
            extra={"retry_sampling": self.unusable > 0} if self.problems else {},
            **usage(prompt_tokens, completion_tokens),
        )

    def gave_up(
        self, last_raw: str, prompt_tokens: int | None = None, completion_tokens: int | None = None
    ) -> EngineResult:
        """Every answer looped: the longest text before a loop is kept (ok, finish_reason "loop"); when
        there is none, ok=False. The last answer is in extra["last_raw"] either way."""
        why = f"the answer still looped after {self.unusable - 1} retries ({self.attempts} attempts)"
        kept = bool(self.best.strip())
        return self.result(
            ok=kept,
            raw=self.best if kept else "",
            finish_reason="loop",
            error=f"{why}; " + ("the text before the loop is kept" if kept else "nothing before the loop to keep"),
            extra={"last_raw": last_raw, "retry_sampling": True} if kept else {"last_raw": last_raw},
            **usage(prompt_tokens, completion_tokens),
        )

    def failed(self, error: str) -> EngineResult:
        """The page failed for another reason (a request no retry fixes, a bad image, an engine error)."""
        return self.result(ok=False, raw="", finish_reason="error", error=error)
