"""The Chandra chat request, built once for every engine and benchmark that sends one.

One user turn: the page image as a data URL first, then the profile's prompt byte for byte; the
profile's sampling (temperature, top_p) and a token limit. `body` is the OpenAI chat-completions
request as a dict; `BodyTemplate` is the same body as JSON bytes with a hole for the base64 image,
cached per (model, sampling, max_tokens, stream, mime): the hot path splices the image into it
(one base64 encode and one copy, not a JSON encode of the image). `b64encode` is pybase64's (SIMD: a
page's 400 KB PNG in ~0.03 ms of CPU, against ~1 ms in the standard library's, in the event loop's thread
for every page: bench/results/client-b64-2026-12-07/), the standard library's where it is not installed.
"""

from __future__ import annotations

import json
from typing import Any

from ocrserve.profiles import Sampling

try:
    from pybase64 import b64encode
except ImportError:  # pragma: no cover - pybase64 is a dependency; a trimmed install falls back
    from base64 import b64encode  # type: ignore[assignment]

_IMG_MARK = "__OCRSERVE_IMAGE_BASE64__"


def image_mime(data: bytes) -> str:
    """image/jpeg for JPEG bytes, else image/png (the renderer's PNG)."""
    return "image/jpeg" if data[:2] == b"\xff\xd8" else "image/png"


def data_url(data: bytes, mime: str | None = None) -> str:
    """The image as a `data:` URL."""
    return f"data:{mime or image_mime(data)};base64,{b64encode(data).decode('ascii')}"


def messages(image_url: str, prompt: str) -> list[dict[str, Any]]:
    """The conversation: one user turn, the image first, then the prompt."""
    return [
        {
            "role": "user",
            "content": [{"type": "image_url", "image_url": {"url": image_url}}, {"type": "text", "text": prompt}],
        }
    ]


def body(
    model: str,
    image_url: str,
    prompt: str,
    sampling: Sampling,
    max_tokens: int | None = None,
    *,
    stream: bool = False,
    ignore_eos: bool = False,
) -> dict[str, Any]:
    """The chat-completions request body (max_tokens: the sampling's unless given)."""
    out: dict[str, Any] = {
        "model": model,
        "messages": messages(image_url, prompt),
        "temperature": sampling.temperature,
        "top_p": sampling.top_p,
        "max_tokens": max_tokens or sampling.max_tokens,
    }
    if ignore_eos:
        out["ignore_eos"] = True
    if stream:
        out["stream"] = True
        out["stream_options"] = {"include_usage": True}
    return out


class BodyTemplate:
    """`body(...)` as JSON bytes around the base64 image, cached per request shape."""

    def __init__(self, prompt: str, *, ignore_eos: bool = False) -> None:
        self.prompt = prompt
        self.ignore_eos = ignore_eos
        self._cache: dict[tuple, tuple[bytes, bytes]] = {}

    def parts(self, model: str, sampling: Sampling, max_tokens: int, stream: bool, mime: str) -> tuple[bytes, bytes]:
        """(head, tail): head + base64(image) + tail is the request body."""
        key = (model, sampling.temperature, sampling.top_p, max_tokens, stream, mime)
        tpl = self._cache.get(key)
        if tpl is None:
            b = body(
                model,
                f"data:{mime};base64,{_IMG_MARK}",
                self.prompt,
                sampling,
                max_tokens,
                stream=stream,
                ignore_eos=self.ignore_eos,
            )
            text = json.dumps(b, ensure_ascii=False).encode("utf-8")
            head, _, tail = text.partition(_IMG_MARK.encode())
            tpl = self._cache[key] = (head, tail)
        return tpl

    def render(self, model: str, sampling: Sampling, max_tokens: int, stream: bool, mime: str, b64: bytes) -> bytes:
        head, tail = self.parts(model, sampling, max_tokens, stream, mime)
        return head + b64 + tail
