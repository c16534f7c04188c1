"""Replicas and dead servers (issue #29, item 10): with `--server A,B` a page whose replica dies is tried
on the other one; a replica down at the start is a warning, and used again once it answers; every
server down is one line and exit 2; with the only server dead, a circuit breaker sends the pages to the
fallback at once (status `fallback`, so a rerun redoes them) instead of each paying its own ladder.
Against real stand-in vLLM processes (tests/fakes/standin.py), through the engine and the CLI."""

from __future__ import annotations

import asyncio
import json
import logging
import subprocess
import sys
from pathlib import Path

from PIL import Image

from ocrserve.engines import PageInput, create_engine
from ocrserve.profiles import load_profile
from tests.fakes.standin import start_standin
from tests.support import helpers
from tests.support.api import free_port

ROOT = Path(__file__).resolve().parents[2]


def pages(n: int, start: int = 0) -> list[PageInput]:
    return [PageInput("d", i, image=Image.new("RGB", (64, 64), (i % 256, 40, 0))) for i in range(start, start + n)]


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "ocrserve", *args], cwd=ROOT, capture_output=True, text=True, timeout=240
    )


async def test_a_page_whose_replica_dies_goes_to_the_other_replica(standin):
    dying = start_standin(default_plan=["die"])
    try:
        eng = create_engine(
            "openai", load_profile("chandra-1"), server=f"{standin.url},{dying.url}", concurrency=2, backoff_s=0.01
        )
        results = await asyncio.gather(*(eng.ocr(p) for p in pages(8)))
        await eng.aclose()
        assert not dying.alive()
        assert all(r.ok for r in results), [r.error for r in results if not r.ok]
        assert all(r.extra["server"] == standin.url for r in results)
        assert standin.stats()["completed"] == 8
        retried = [r for r in results if r.attempts > 1]
        assert retried and all(dying.url in r.extra["problems"][0] for r in retried)
    finally:
        dying.stop()


async def test_a_replica_down_at_start_is_a_warning_and_is_used_once_it_answers(standin, caplog):
    port = free_port()  # nothing listens there yet
    late = f"http://127.0.0.1:{port}/v1"
    eng = create_engine(
        "openai", None, server=f"{standin.url},{late}", concurrency=2, backoff_s=0.01, down_cooldown_s=0.2
    )
    with caplog.at_level(logging.WARNING):
        await eng.preflight()  # used to raise: a dead replica refused the whole run
    assert any(late in r.getMessage() and "going on with the other servers" in r.getMessage() for r in caplog.records)
    assert eng.profile.name == "chandra-1"  # the live replica's model
    results = await asyncio.gather(*(eng.ocr(p) for p in pages(6)))
    assert all(r.ok for r in results) and standin.stats()["completed"] == 6
    server = start_standin(port=port)
    try:
        n = 6
        for _ in range(100):  # until a probe finds it up: the pages go to both again
            results = await asyncio.gather(*(eng.ocr(p) for p in pages(4, n)))
            n += 4
            assert all(r.ok for r in results)
            if server.stats()["completed"]:
                break
            await asyncio.sleep(0.1)
        assert server.stats()["completed"] > 0
    finally:
        await eng.aclose()
        server.stop()


def test_every_server_down_at_start_is_one_line_and_exit_2(tmp_path):
    pdf = helpers.text_pdf(tmp_path / "x.pdf", pages=1)
    down = f"http://127.0.0.1:{free_port()}/v1,http://127.0.0.1:{free_port()}/v1"
    r = cli("convert", str(pdf), "-o", str(tmp_path / "out"), "--server", down, "-q")
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: no server answers: cannot reach"), r.stderr


def test_a_replica_down_at_start_does_not_refuse_the_run(tmp_path, standin):
    pdf = helpers.text_pdf(tmp_path / "x.pdf", pages=3)
    out = tmp_path / "out"
    down = f"http://127.0.0.1:{free_port()}/v1"
    r = cli("convert", str(pdf), "-o", str(out), "--server", f"{standin.url},{down}", "-q")
    assert r.returncode == 0, r.stderr
    assert down in r.stderr and "going on with the other servers" in r.stderr
    data = json.loads((out / "x" / "x.json").read_text())
    assert [p["status"] for p in data["pages"]] == ["ok"] * 3


async def test_with_the_only_server_dead_pages_fail_at_once_not_each_after_its_ladder():
    """The first request kills the server; the rest used to go through 6 attempts each (about 13 s of
    backoff a page). The breaker opens after 3 failed requests once the server has not answered for its
    cooldown (2 s), and every later attempt fails at once."""
    dying = start_standin(default_plan=["die"])
    try:
        eng = create_engine("openai", load_profile("chandra-1"), server=dying.url, concurrency=4)
        results = await asyncio.gather(*(eng.ocr(p) for p in pages(12)))
        await eng.aclose()
    finally:
        dying.stop()
    assert not any(r.ok for r in results)
    assert sum(r.attempts for r in results) <= 12 * 4  # the first 2 s of backoff at most: not 12 x 6
    down = [r for r in results if "is down (" in (r.error or "")]
    assert len(down) >= 12 - 4 and all("failed requests in a row" in r.error for r in down)


def test_with_the_server_dead_mid_run_the_pages_are_the_fallbacks_and_marked_so(tmp_path):
    dying = start_standin(default_plan=["die"])
    pdf = helpers.text_pdf(tmp_path / "x.pdf", pages=6, title="Rescued")
    out = tmp_path / "out"
    try:
        r = cli("convert", str(pdf), "-o", str(out), "--server", dying.url, "-c", "2", "-q")
    finally:
        dying.stop()
    data = json.loads((out / "x" / "x.json").read_text())
    assert [p["status"] for p in data["pages"]] == ["fallback"] * 6, r.stderr
    assert all(p["engine"] == "lite" for p in data["pages"])
    assert sum("is down (" in p["error"] for p in data["pages"]) >= 4  # all but the pages in flight
    assert "is down" in r.stderr  # the breaker's warning


def test_the_breaker_opens_probes_once_and_closes_on_an_answer():
    from ocrserve.engines.openai_breaker import Breaker

    now = [0.0]
    b = Breaker("http://s/v1", threshold=3, cooldown_s=2.0, max_cooldown_s=5.0, clock=lambda: now[0])
    for _ in range(3):
        b.failed("refused")
    assert b.ready()  # three in a row at once, the server answered a moment ago (the start): still closed
    now[0] = 1.9
    b.failed("refused")
    assert b.ready()  # and not for its cooldown yet
    now[0] = 2.0
    b.failed("refused")
    assert not b.ready() and "5 failed requests in a row" in b.why()
    now[0] = 4.0
    assert b.ready() and b.take() is True  # half-open: one probe
    assert not b.ready()  # and only one
    b.failed("refused", probe=True)
    now[0] = 7.9
    assert not b.ready()  # the cooldown doubled (2 -> 4)
    now[0] = 8.0
    assert b.ready() and b.take()
    b.answered()
    assert b.ready() and b.take() is False and b.failures == 0
    for _ in range(4):  # a burst of failures right after an answer: the pages in flight at one hiccup
        b.failed("reset")
    assert b.ready()
