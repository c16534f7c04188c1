"""Trailing n-gram repetition count used by olmOCR-Bench's baseline test."""

from __future__ import annotations

import re

_WS = re.compile(r"\s+")


def trailing_repeats(text: str, max_ngram: int = 5) -> list[int]:
    """For n = 1..max_ngram: how many times the last n characters repeat back to back at the end.

    Whitespace runs count as one space. ``"abab"`` gives ``[1, 2, 1]`` for max_ngram=3 (the last
    "b" once, "ab" twice, "bab" once); an empty text gives zeros.
    """
    counts = [0] * max_ngram
    if not text:
        return counts
    flat = _WS.sub(" ", text)
    for n in range(1, max_ngram + 1):
        if len(flat) < n:
            continue
        tail = flat[-n:]
        count = 0
        pos = len(flat) - n
        while pos >= 0 and flat[pos : pos + n] == tail:
            count += 1
            pos -= n
        counts[n - 1] = count
    return counts
