"""The root of ocrserve's errors.

Every error ocrserve raises on purpose (bad options, an unreadable input, an engine that cannot start, a
server that refuses, a plan that does not fit the GPU) derives from `OcrserveError`, keeping its other
base where callers rely on it (`ValueError` for bad values). The CLI turns one into a single line on
stderr and exit code 2 (usage) or 1; the Python API raises it as it is. Its message names the input
and the reason.
"""

from __future__ import annotations


class OcrserveError(Exception):
    """An error of ocrserve's own: the message says what and why, in one line."""


__all__ = ["OcrserveError"]
