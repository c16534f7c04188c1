"""The stand-in vLLM server's config (what /_control sets) and its constants."""

from __future__ import annotations

from pydantic import BaseModel, Field, field_validator

CHARS_PER_TOKEN = 4
PROMPT_TEXT_TOKENS = 400  # the prompt's text, as the usage figure counts it
PATCH = 32  # patch 16 x spatial merge 2: one visual token per 32x32 pixels
STEPS = {"ok", "500", "503", "400", "429", "drop", "loop", "cutoff", "garbage", "trickle", "huge", "overcount", "die"}


# ---------------------------------------------------------------------------------------- config


class StandInConfig(BaseModel):
    """What /_control sets. Unknown keys are refused (a typo in a test should fail loudly)."""

    model_config = {"extra": "forbid"}

    model: str = "chandra"  # the served model name
    root: str = "datalab-to/chandra"  # the checkpoint it stands in for (its answers are Chandra 1's)
    max_model_len: int = 16384  # prompt + max_tokens above this: 400, as vLLM answers
    api_key: str | None = None  # when set, requests need `Authorization: Bearer <key>`
    delay_s: float = 0.0  # latency before the first token of every answer
    token_delay_s: float = 0.0  # per streamed chunk (and per chunk's worth, not streaming)
    chunk_chars: int = 4  # characters per streamed content delta (~ one token)
    max_concurrency: int = 0  # simulated batch size: beyond it requests wait (0 = no limit)
    retry_after: str | None = "0"  # Retry-After header sent with 429 and 503
    hold_until_in_flight: int = 0  # hold each answer until this many requests are in flight
    hold_timeout_s: float = 5.0  #   (or this long): tests of concurrency without timing
    trickle_s: float = 0.1  # "trickle": seconds between two pieces of the never-ending answer
    huge_chars: int = 2_000_000  # "huge": characters of the answer
    plans: dict[str, list[str]] = Field(default_factory=dict)  # sha256 prefix -> steps per attempt
    default_plan: list[str] = Field(default_factory=list)  # for images no plan names

    @field_validator("plans")
    @classmethod
    def _check_plans(cls, v: dict[str, list[str]]) -> dict[str, list[str]]:
        for steps in v.values():
            _check_steps(steps)
        return v

    @field_validator("default_plan")
    @classmethod
    def _check_default(cls, v: list[str]) -> list[str]:
        return _check_steps(v)


def _check_steps(steps: list[str]) -> list[str]:
    for s in steps:
        if s.startswith("slow:"):
            float(s[5:])
        elif s not in STEPS:
            raise ValueError(f"unknown plan step {s!r}: use one of {sorted(STEPS)} or slow:<seconds>")
    return steps
