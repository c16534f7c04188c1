"""engines/chat.py: the one Chandra chat request (openai engine, vllm engine, bench)."""

from __future__ import annotations

import base64
import io
import json
from typing import Any

import pytest
from PIL import Image

from ocrserve.engines import chat
from ocrserve.profiles import load_profile


def _png() -> bytes:
    img = Image.new("RGB", (40, 24), "white")
    img.putpixel((3, 5), (10, 20, 30))
    buf = io.BytesIO()
    img.save(buf, format="PNG", compress_level=1)
    return buf.getvalue()


def _old_template(
    prompt: str, model: str, sampling, max_tokens: int, stream: bool, mime: str, ignore_eos: bool
) -> tuple[bytes, bytes]:
    """What engines/openai.py built before chat.py (OpenAIEngine._template), verbatim."""
    mark = "__OCRSERVE_IMAGE_BASE64__"
    body: dict[str, Any] = {
        "model": model,
        "messages": [
            {
                "role": "user",
                "content": [
                    {"type": "image_url", "image_url": {"url": f"data:{mime};base64,{mark}"}},
                    {"type": "text", "text": prompt},
                ],
            }
        ],
        "temperature": sampling.temperature,
        "top_p": sampling.top_p,
        "max_tokens": max_tokens,
    }
    if ignore_eos:
        body["ignore_eos"] = True
    if stream:
        body["stream"] = True
        body["stream_options"] = {"include_usage": True}
    text = json.dumps(body, ensure_ascii=False).encode("utf-8")
    head, _, tail = text.partition(mark.encode())
    return head, tail


@pytest.mark.parametrize("name", ["chandra-1", "chandra-2"])
@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("ignore_eos", [False, True])
def test_body_is_byte_identical_to_the_old_openai_template(name, stream, ignore_eos):
    profile = load_profile(name)
    png = _png()
    b64 = base64.b64encode(png)
    tpl = chat.BodyTemplate(profile.prompt, ignore_eos=ignore_eos)
    for sampling in (profile.sampling, profile.retry_sampling):
        head, tail = _old_template(profile.prompt, "served", sampling, 321, stream, "image/png", ignore_eos)
        assert tpl.render("served", sampling, 321, stream, "image/png", b64) == head + b64 + tail
        # the dict form is the same request
        as_dict = chat.body(
            "served", chat.data_url(png), profile.prompt, sampling, 321, stream=stream, ignore_eos=ignore_eos
        )
        assert json.dumps(as_dict, ensure_ascii=False).encode() == head + b64 + tail


def test_template_is_cached_per_request_shape():
    profile = load_profile("chandra-1")
    tpl = chat.BodyTemplate(profile.prompt)
    a = tpl.parts("m", profile.sampling, 100, False, "image/png")
    assert tpl.parts("m", profile.sampling, 100, False, "image/png") is a
    assert tpl.parts("m", profile.sampling, 101, False, "image/png") != a
    assert b'"max_tokens": 101' in tpl.parts("m", profile.sampling, 101, False, "image/png")[1]


def test_messages_image_first_then_the_prompt_byte_for_byte():
    profile = load_profile("chandra-2")
    png = _png()
    (turn,) = chat.messages(chat.data_url(png), profile.prompt)
    assert turn["role"] == "user"
    img, txt = turn["content"]
    assert img == {"type": "image_url", "image_url": {"url": "data:image/png;base64," + base64.b64encode(png).decode()}}
    assert txt == {"type": "text", "text": profile.prompt}


def test_mime_from_the_bytes():
    buf = io.BytesIO()
    Image.new("RGB", (4, 4)).save(buf, format="JPEG")
    assert chat.image_mime(buf.getvalue()) == "image/jpeg" and chat.image_mime(_png()) == "image/png"
    assert chat.data_url(buf.getvalue()).startswith("data:image/jpeg;base64,")


def test_body_defaults_to_the_samplings_token_limit():
    profile = load_profile("chandra-1")
    b = chat.body("m", "data:image/png;base64,AA==", profile.prompt, profile.sampling)
    assert b["max_tokens"] == profile.sampling.max_tokens and "stream" not in b and "ignore_eos" not in b


def test_the_bench_sends_the_engines_request():
    from ocrserve.bench.clients import _body

    profile = load_profile("chandra-1")
    png = _png()
    assert _body("m", profile, png, 55, True, stream=True) == chat.body(
        "m", chat.data_url(png), profile.prompt, profile.sampling, 55, stream=True, ignore_eos=True
    )


def test_the_image_is_base64_encoded_by_pybase64_as_the_standard_library_encodes_it():
    import os

    import pybase64

    assert chat.b64encode is pybase64.b64encode  # SIMD: ~1 ms of the event loop's CPU a page less
    for data in (b"", b"\x00", os.urandom(1), os.urandom(2), os.urandom(3), os.urandom(400_001), _png()):
        assert chat.b64encode(data) == base64.b64encode(data)
    assert chat.data_url(_png()) == "data:image/png;base64," + base64.b64encode(_png()).decode("ascii")
