"""Answers without bounds (issue #29, item 9): the openai engine gives each request a total deadline
derived from its max_tokens and caps an answer at what max_tokens allows (its size, and the
completion_tokens the server reports); a request that breaks either is a failed attempt, retried
and then left to the fallback. Against the real stand-in vLLM process (tests/fakes/standin.py)."""

from __future__ import annotations

import asyncio
import hashlib
import io

import pytest
from PIL import Image, ImageDraw

from ocrserve.engines.base import PageInput
from ocrserve.engines.openai import OpenAIEngine
from tests.fakes.standin import expected_output


def make_page(i: int) -> PageInput:
    im = Image.new("RGB", (64, 96), (250, 250, 250))
    ImageDraw.Draw(im).rectangle([4, 4 + i % 50, 40, 10 + i % 50], fill=(i * 37 % 256, i * 11 % 256, 90))
    buf = io.BytesIO()
    im.save(buf, format="PNG")
    return PageInput(doc_id="doc", index=i, png=buf.getvalue(), width=64, height=96, unit="px")


def sha(page: PageInput) -> str:
    return hashlib.sha256(page.png_bytes()).hexdigest()


async def ocr(standin, page: PageInput, **kw):
    kw.setdefault("backoff_s", 0.01)
    eng = OpenAIEngine("chandra-1", server=standin.url, **kw)
    try:
        # the bound under test is the engine's own; this one only keeps an unbounded engine from hanging pytest
        return await asyncio.wait_for(eng.ocr(page), 60)
    finally:
        await eng.aclose()


async def first_problem(standin, n: int, plan: str, control: dict, stream: bool, **kw) -> str:
    """Page `n`, whose first answer the stand-in spoils as `plan` says: the retry gets the page's answer;
    the problem the first attempt was is answered."""
    page = make_page(n)
    standin.control(plans={sha(page)[:16]: [plan]}, **control)
    res = await ocr(standin, page, stream=stream, **kw)
    assert res.ok and res.attempts == 2, res.error
    assert res.raw == expected_output(page.png_bytes())
    return res.extra["problems"][0]


@pytest.mark.parametrize("stream", [False, True])
async def test_an_answer_that_trickles_for_ever_meets_the_requests_deadline(standin, stream):
    """A server that sends a piece every 0.1 s and never finishes: every byte used to reset the read timeout,
    so the page was held for ever. The total deadline ends the attempt; the retry gets the answer."""
    problem = await first_problem(standin, 1, "trickle", {"trickle_s": 0.1}, stream, timeout=1.5)
    assert "no complete answer within the request's deadline of 1.5 s" in problem


@pytest.mark.parametrize("stream", [False, True])
async def test_an_answer_larger_than_max_tokens_allows_is_a_failed_attempt(standin, stream):
    """A 2 MB answer with finish_reason stop for max_tokens=600 used to be the page's ok answer."""
    problem = await first_problem(standin, 2, "huge", {"huge_chars": 2_000_000}, stream, max_tokens=600)
    assert "larger than max_tokens=600 allows" in problem


@pytest.mark.parametrize("stream", [False, True])
async def test_completion_tokens_above_max_tokens_is_a_failed_attempt(standin, stream):
    problem = await first_problem(standin, 3, "overcount", {}, stream, max_tokens=600)
    assert "1600 completion tokens, more than max_tokens=600" in problem


async def test_a_server_that_always_answers_too_much_fails_the_page_for_the_fallback(standin):
    page = make_page(4)
    standin.control(default_plan=["huge"] * 10, huge_chars=500_000)
    res = await ocr(standin, page, max_tokens=256, max_connection_retries=2)
    assert not res.ok and res.attempts == 3 and res.raw == ""
    assert "larger than max_tokens=256 allows" in res.error


def test_the_deadline_follows_max_tokens_unless_given():
    """60 s + max_tokens / 8 (8 tokens/s), at least 600 s; --timeout (OCRSERVE_REQUEST_TIMEOUT) replaces it."""
    eng = OpenAIEngine("chandra-2", server="http://x")
    assert eng.deadline(12384) == pytest.approx(60 + 12384 / 8) == pytest.approx(1608)
    assert eng.deadline(1024) == 600
    assert OpenAIEngine("chandra-2", server="http://x", timeout=30).deadline(12384) == 30
