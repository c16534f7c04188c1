"""Engine `openai` against the real stand-in vLLM process (tests/standin.py)."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import io
import json
import socket

import pytest
from PIL import Image, ImageDraw

from ocrserve.engines import create_engine
from ocrserve.engines.base import EngineError, PageInput
from ocrserve.engines.openai import OpenAIEngine, normalize_base_url, parse_retry_after
from ocrserve.parse import is_repetition_loop, parse_output
from ocrserve.profiles import load_profile
from ocrserve.settings import get_settings
from tests.fakes.standin import expected_output
from tests.support.cases import maps_as


def make_page(i: int, size: tuple[int, int] = (64, 96)) -> PageInput:
    """A small distinct page image (distinct bytes -> distinct sha256 at the server)."""
    im = Image.new("RGB", size, (250, 250, 250))
    d = ImageDraw.Draw(im)
    d.rectangle([4, 4 + i % 50, 40, 10 + i % 50], fill=(i * 37 % 256, i * 11 % 256, 90))
    d.text((5, 30), str(i), fill=(0, 0, 0))
    buf = io.BytesIO()
    im.save(buf, format="PNG", compress_level=1)
    return PageInput(doc_id="doc", index=i, png=buf.getvalue(), width=size[0], height=size[1], unit="px")


def sha(page: PageInput) -> str:
    return hashlib.sha256(page.png_bytes()).hexdigest()


def engine_for(standin, **kw) -> OpenAIEngine:
    kw.setdefault("backoff_s", 0.01)
    return OpenAIEngine(kw.pop("profile", "chandra-1"), server=kw.pop("server", standin.url), **kw)


async def run_one(engine: OpenAIEngine, page: PageInput, **kw):
    try:
        return await engine.ocr(page, **kw)
    finally:
        await engine.aclose()


# ------------------------------------------------------------------------------------ happy paths


async def test_json_answer_matches_its_image_and_request_is_exact(standin):
    profile = load_profile("chandra-1")
    page = make_page(1)
    res = await run_one(engine_for(standin), page)
    assert res.ok and res.engine == "openai" and res.attempts == 1
    assert res.raw == expected_output(page.png_bytes())
    assert f"<h1>Page {sha(page)[:12]}</h1>" in res.raw
    assert res.finish_reason == "stop"
    assert res.prompt_tokens == (64 // 32) * (96 // 32) + 400
    assert res.completion_tokens and res.completion_tokens > 50
    last = standin.stats()["last"]
    assert last["prompt"] == profile.prompt  # the prompt byte for byte
    assert last["prompt"].encode() == profile.prompt.encode()
    assert last["sha"] == sha(page) and last["image_mime"] == "image/png"
    assert last["stream"] is False
    assert last["sampling"]["temperature"] == profile.sampling.temperature == 0.0
    assert last["sampling"]["top_p"] == profile.sampling.top_p == 0.1
    assert last["sampling"]["max_tokens"] == profile.sampling.max_tokens
    blocks = parse_output(res.raw, profile, (64, 96), unit="px").blocks
    assert [b.label for b in blocks][:1] == ["Section-Header"]
    assert {"Text", "Table", "Image"} <= {b.label for b in blocks}


def test_request_body_shape_image_first_then_prompt():
    """The body itself: one user turn, image data URL of the page PNG first, then the prompt."""
    for name in ("chandra-1", "chandra-2"):
        profile = load_profile(name)
        eng = OpenAIEngine(profile, server="http://127.0.0.1:9", served_model="m")
        page = make_page(3)
        head, tail = eng._body.parts("m", profile.sampling, 100, False, "image/png")
        body = json.loads(head + base64.b64encode(page.png_bytes()) + tail)
        assert list(body) == ["model", "messages", "temperature", "top_p", "max_tokens"]
        (msg,) = body["messages"]
        assert msg["role"] == "user"
        img, txt = msg["content"]
        assert img["type"] == "image_url" and txt["type"] == "text"
        prefix = "data:image/png;base64,"
        assert img["image_url"]["url"].startswith(prefix)
        assert base64.b64decode(img["image_url"]["url"][len(prefix) :]) == page.png_bytes()
        assert txt["text"] == profile.prompt and "{bbox_scale}" not in txt["text"]
        assert (body["temperature"], body["top_p"], body["max_tokens"]) == (0.0, 0.1, 100)


async def test_sse_stream_delivers_deltas(standin):
    page = make_page(2)
    pieces: list[str] = []

    async def on_delta(piece: str) -> None:
        pieces.append(piece)

    res = await run_one(engine_for(standin), page, on_delta=on_delta)
    assert res.ok and res.attempts == 1
    assert len(pieces) > 20 and all(0 < len(p) <= 4 for p in pieces)
    assert "".join(pieces) == res.raw == expected_output(page.png_bytes())
    assert res.finish_reason == "stop"
    assert res.prompt_tokens == 406 and res.completion_tokens and res.completion_tokens > 50
    assert standin.stats()["last"]["stream"] is True


async def test_stream_flag_without_callback_and_sync_callback(standin):
    seen: list[str] = []
    res = await run_one(engine_for(standin, stream=True), make_page(4), on_delta=seen.append)
    assert res.ok and "".join(seen) == res.raw
    assert standin.stats()["last"]["stream"] is True
    res = await run_one(engine_for(standin, stream=True), make_page(5))
    assert res.ok and res.raw == expected_output(make_page(5).png_bytes())


async def test_ignore_eos_produces_exactly_max_tokens_without_retry(standin):
    res = await run_one(engine_for(standin, max_tokens=256, ignore_eos=True), make_page(6))
    assert res.ok and res.attempts == 1
    assert res.completion_tokens == 256 and res.finish_reason == "length" and len(res.raw) == 256 * 4
    assert standin.stats()["last"]["sampling"]["ignore_eos"] is True


# ------------------------------------------------------------------------------------ retries


@pytest.mark.parametrize("stream", [False, True])
async def test_transient_failures_are_retried_then_succeed(standin, stream):
    page = make_page(10)
    standin.control(plans={sha(page)[:16]: ["500", "drop", "429", "503"]})
    res = await run_one(engine_for(standin, stream=stream), page)
    assert res.ok, res.error
    assert res.attempts == 5
    assert res.raw == expected_output(page.png_bytes())
    assert standin.stats()["attempts"][sha(page)] == 5
    probs = res.extra["problems"]
    assert "HTTP 500" in probs[0] and "HTTP 429" in probs[2] and "HTTP 503" in probs[3]
    assert "RemoteProtocolError" in probs[1]


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("profile_name,retry_temperature", [("chandra-1", 0.3), ("chandra-2", 0.2)])
async def test_a_loop_is_retried_with_the_profiles_retry_sampling(standin, stream, profile_name, retry_temperature):
    profile = load_profile(profile_name)
    page = make_page(20)
    standin.control(plans={sha(page)[:12]: ["loop"]})
    res = await run_one(engine_for(standin, profile=profile, stream=stream, max_tokens=600), page)
    assert res.ok and res.attempts == 2
    assert res.raw == expected_output(page.png_bytes())
    log = standin.stats()["log"]
    assert [e["step"] for e in log] == ["loop", "ok"]
    assert (log[0]["temperature"], log[0]["top_p"]) == (profile.sampling.temperature, profile.sampling.top_p)
    assert (log[1]["temperature"], log[1]["top_p"]) == (retry_temperature, 0.95)
    assert res.extra["retry_sampling"] is True


@pytest.mark.parametrize("stream", [False, True])
async def test_a_cut_off_answer_is_kept_after_one_request(standin, stream):
    """As upstream: an answer that reached max_tokens without looping is the page's answer, not retried."""
    page = make_page(21)
    standin.control(plans={sha(page)[:12]: ["cutoff"]})
    res = await run_one(engine_for(standin, stream=stream, max_tokens=600), page)
    assert res.ok and res.attempts == 1 and res.finish_reason == "length"
    assert res.raw and expected_output(page.png_bytes()).startswith(res.raw)
    assert standin.stats()["attempts"][sha(page)] == 1
    assert "cut off at max_tokens=600" in res.error and "--max-tokens" in res.error


async def test_400_fails_at_once(standin):
    page = make_page(30)
    standin.control(plans={sha(page)[:8]: ["400", "ok"]})
    res = await run_one(engine_for(standin), page)
    assert not res.ok and res.attempts == 1
    assert "HTTP 400" in res.error and "Bad request" in res.error
    assert standin.stats()["attempts"][sha(page)] == 1


async def test_gives_up_on_persistent_server_errors(standin):
    page = make_page(31)
    standin.control(default_plan=["503"] * 10)
    eng = engine_for(standin, max_connection_retries=2)
    res = await run_one(eng, page)
    assert not res.ok and res.attempts == 3 and res.finish_reason == "error"
    assert "gave up after 3 attempts" in res.error and "HTTP 503" in res.error
    assert standin.stats()["attempts"][sha(page)] == 3


async def test_still_looping_after_the_last_retry_keeps_the_text_before_the_loop(standin):
    profile = load_profile("chandra-2").model_copy(update={"max_retries": 3})
    page = make_page(32)
    standin.control(default_plan=["loop"] * 10)
    res = await run_one(engine_for(standin, profile=profile, max_tokens=500), page)
    assert res.ok and res.attempts == 4 and res.finish_reason == "loop"
    assert "still looped after 3 retries" in res.error and "before the loop is kept" in res.error
    assert is_repetition_loop(res.extra["last_raw"])
    assert not is_repetition_loop(res.raw) and res.raw.count("the same words again") == 1
    assert res.raw.startswith(expected_output(page.png_bytes()).split("\n")[0])  # the first block, as answered
    temps = [e["temperature"] for e in standin.stats()["log"]]
    assert temps == [0.0, 0.2, 0.4, min(0.0 + 0.2 * 3, 0.8)]  # Chandra 2's rising retry temperature


async def test_timeout_is_retried(standin):
    page = make_page(33)
    standin.control(plans={sha(page)[:10]: ["slow:3"]})
    res = await run_one(engine_for(standin, timeout=0.4), page)
    assert res.ok and res.attempts == 2
    assert "timed out" in res.extra["problems"][0]


async def test_unreachable_server_fails_cleanly():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again when the block ends: nothing listens there
    eng = OpenAIEngine("chandra-1", server=f"127.0.0.1:{port}", backoff_s=0.01, max_connection_retries=1)
    assert await eng.check() is False
    res = await run_one(eng, make_page(34))
    assert not res.ok and res.attempts == 2
    assert "ConnectError" in res.error and f"127.0.0.1:{port}" in res.error


async def test_context_overflow_lowers_max_tokens_then_learns(standin):
    standin.control(max_model_len=2000)
    eng = engine_for(standin)
    try:
        first = await eng.ocr(make_page(40))
        second = await eng.ocr(make_page(41))
    finally:
        await eng.aclose()
    assert first.ok and first.attempts == 2 and "too large" in first.extra["problems"][0]
    assert second.ok and second.attempts == 1
    st = standin.stats()
    assert st["total_requests"] == 3  # the refused one, then one request per page
    assert [e["max_tokens"] for e in st["log"]] == [2000 - 406, 2000 - 406]


# ------------------------------------------------------------------------ model, auth, concurrency


async def test_served_model_discovered_and_api_key_sent(standin):
    standin.control(model="chandra-x", api_key="sekrit")
    eng = engine_for(standin, api_key="sekrit")
    res = await run_one(eng, make_page(50))
    assert res.ok and eng.served_model == "chandra-x" and eng.max_model_len == 16384
    res = await run_one(engine_for(standin), make_page(51))
    assert not res.ok and res.attempts == 1 and "401" in res.error and "--api-key" in res.error
    res = await run_one(engine_for(standin, api_key="sekrit", served_model="nope"), make_page(52))
    assert not res.ok and res.attempts == 1 and "404" in res.error and "nope" in res.error


async def test_concurrency_is_honoured_and_reached(standin):
    # each answer waits until 5 requests are in flight (or 5 s): reaching 5 needs no timing luck
    standin.control(hold_until_in_flight=5, delay_s=0.05)
    eng = engine_for(standin, concurrency=5)
    assert eng.capacity() == 5
    pages = [make_page(100 + i) for i in range(15)]
    try:
        results = await asyncio.gather(*(eng.ocr(p) for p in pages))
    finally:
        await eng.aclose()
    assert all(r.ok for r in results)
    for p, r in zip(pages, results):
        assert r.raw == expected_output(p.png_bytes())
    st = standin.stats()
    assert st["total_requests"] == 15
    assert st["max_in_flight"] == 5


def test_capacity_defaults_and_settings():
    assert OpenAIEngine("chandra-1", server="http://h:8000").capacity() == 128
    # the engine reads no Settings: create_engine gives it OCRSERVE_CONCURRENCY's value, unless one is chosen
    assert create_engine("openai", "chandra-1", get_settings(concurrency=40), server="http://h:8000").capacity() == 40
    assert create_engine("openai", "chandra-1", get_settings(concurrency=40), server="h", concurrency=7).capacity() == 7
    assert OpenAIEngine("chandra-1", server="http://h:8000", concurrency=7).capacity() == 7
    eng = create_engine("openai", load_profile("chandra-1"), server="h:8000", concurrency=3)
    assert isinstance(eng, OpenAIEngine) and eng.capacity() == 3


async def test_check_reports_readiness(standin):
    eng = engine_for(standin)
    try:
        assert await eng.check() is True
    finally:
        await eng.aclose()


# ------------------------------------------------------------------------------------ pure parts


# a server's URL as given -> its base URL
BASE_URLS = {
    "http://host:8000": "http://host:8000/v1",
    "http://host:8000/": "http://host:8000/v1",
    "http://host:8000/v1": "http://host:8000/v1",
    "http://host:8000/v1/": "http://host:8000/v1",
    "host:8000": "http://host:8000/v1",
    "https://api.example.com/openai/v1/chat/completions": "https://api.example.com/openai/v1",
    "http://10.0.0.2:8000/v1/models": "http://10.0.0.2:8000/v1",
}

test_normalize_base_url = maps_as(normalize_base_url, BASE_URLS)


@pytest.mark.parametrize("bad", ["", "   ", "ftp://host/x", "http://"])
def test_bad_server_url_is_a_clear_error(bad):
    with pytest.raises(EngineError, match="server URL"):
        OpenAIEngine("chandra-1", server=bad)


def test_parse_retry_after():
    assert parse_retry_after("3") == 3.0
    assert parse_retry_after("0.5") == 0.5
    assert parse_retry_after(None) is None and parse_retry_after("soon") is None
    assert 0 <= parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT") <= 0.0 + 1e-9


async def test_stream_retry_signals_restart_with_empty_delta(standin):
    page = make_page(60)
    standin.control(plans={sha(page)[:12]: ["drop", "loop"]}, chunk_chars=16)
    pieces: list[str] = []
    res = await run_one(engine_for(standin, max_tokens=600), page, on_delta=pieces.append)
    assert res.ok and res.attempts == 3
    assert pieces.count("") == 2  # before attempt 2 and before attempt 3
    last_restart = len(pieces) - 1 - pieces[::-1].index("")
    assert "".join(pieces[last_restart + 1 :]) == res.raw == expected_output(page.png_bytes())


async def test_failing_delta_callback_does_not_fail_the_page(standin):
    calls = []

    def bad(piece: str) -> None:
        calls.append(piece)
        raise ValueError("consumer broke")

    page = make_page(61)
    res = await run_one(engine_for(standin), page, on_delta=bad)
    assert res.ok and res.raw == expected_output(page.png_bytes())
    assert len(calls) == 1


async def test_prompt_longer_than_context_fails_at_once(standin):
    standin.control(max_model_len=300)  # the 64x96 page alone needs 406 tokens
    res = await run_one(engine_for(standin), make_page(70))
    assert not res.ok and res.attempts == 1
    assert "HTTP 400" in res.error and "maximum context length is 300" in res.error


async def test_replicas_share_the_pages(standin):
    """Two server URLs (data-parallel replicas) make one engine that spreads pages over both."""
    import asyncio

    from PIL import Image

    from ocrserve.engines import PageInput, create_engine
    from ocrserve.profiles import load_profile
    from tests.fakes.standin import start_standin

    other = start_standin()
    try:
        eng = create_engine("openai", load_profile("chandra-1"), server=f"{standin.url},{other.url}", concurrency=2)
        assert eng.capacity() == 4
        pages = [PageInput("d", i, image=Image.new("RGB", (64, 64), (i, 0, 0))) for i in range(8)]
        results = await asyncio.gather(*(eng.ocr(p) for p in pages))
        await eng.aclose()
        assert all(r.ok for r in results)
        assert standin.stats()["total_requests"] + other.stats()["total_requests"] == 8
        assert standin.stats()["total_requests"] >= 2 and other.stats()["total_requests"] >= 2
    finally:
        other.stop()


def test_default_timeout_gives_the_longest_page_time(monkeypatch):
    # a request's deadline (streamed or not) covers the page's token limit at 8 tokens/s, at least 600 s
    monkeypatch.delenv("OCRSERVE_REQUEST_TIMEOUT", raising=False)
    s = get_settings()
    assert s.request_timeout is None
    budget = load_profile("chandra-1").sampling.max_tokens
    assert create_engine("openai", "chandra-1", s, server="http://x").timeout == pytest.approx(60 + budget / 8)
    assert OpenAIEngine("chandra-1", server="http://x", max_tokens=1024).timeout == 600
    assert OpenAIEngine("chandra-1", server="http://x", stream=True).timeout == pytest.approx(60 + budget / 8)
    assert create_engine("openai", "chandra-1", get_settings(request_timeout=90), server="http://x").timeout == 90
    assert create_engine("openai", "chandra-1", get_settings(request_timeout=90), server="x", timeout=5).timeout == 5
