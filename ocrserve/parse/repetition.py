"""Detect a model caught in a repetition loop (the engines retry such a page with retry sampling)."""

from __future__ import annotations


def repetition_period(text: str, *, min_span: int = 400, min_repeats: int = 6, max_period: int = 1000) -> int | None:
    """Period (in characters) of a loop the text ends in, or None.

    A loop runs until the token limit, so it sits at the end of the text. The text ends in a loop
    when some unit of at most `max_period` characters repeats back to back at least `min_repeats`
    times, covering at least `min_span` characters. Looking at every rotation of the unit (the
    suffix itself) makes a loop cut off mid-unit count too.
    """
    if not isinstance(text, str):
        return None
    t = text.rstrip()
    n = len(t)
    if n < min_span or min_repeats < 2:
        return None
    for p in range(1, min(max_period, n // min_repeats) + 1):
        unit = t[n - p :]
        if t[n - 2 * p : n - p] != unit or not unit.strip():
            continue
        end = n - p
        repeats = 1
        while end - p >= 0 and t[end - p : end] == unit:
            repeats += 1
            end -= p
        if repeats >= min_repeats and repeats * p >= min_span:
            return p
    return None


def is_repetition_loop(text: str, **kwargs) -> bool:
    """True when the text ends in a repetition loop (see repetition_period)."""
    return repetition_period(text, **kwargs) is not None
