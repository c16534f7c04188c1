"""The router of `ocrserve serve` on several GPUs (ocrserve/vllm/router.py): one URL over stand-in replicas
(tests/fakes/standin.py, real HTTP processes speaking vLLM's protocol), each killed and restarted for real."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import threading
import time

import httpx
import pytest

from ocrserve.vllm.router import Router
from ocrserve.vllm.router import httpx as router_httpx
from ocrserve.vllm.router_metrics import merge_metrics
from tests.fakes.standin import StandIn, expected_output, start_standin
from tests.support.helpers import text_pdf
from tests.support.replicas import ROOT, RouterProcess, body, concurrently, png, wait_until


@pytest.fixture
def cluster(tmp_path):
    """make(n, **standin_config) -> (stand-ins, router); all stopped at the end (a restarted one too)."""
    made: list = []

    def make(n: int, **cfg):
        replicas = [start_standin(**cfg) for _ in range(n)]
        made.extend(replicas)
        router = RouterProcess(replicas, tmp_path / "router.log")
        made.append(router)
        return replicas, router

    def restart(old: StandIn, **cfg) -> StandIn:
        new = start_standin(port=old.port, **cfg)
        made.append(new)
        return new

    make.restart = restart
    yield make
    for m in made:
        m.stop()


def test_requests_are_spread_over_every_replica(cluster):
    replicas, router = cluster(3, delay_s=0.3)
    # one at a time: ties rotate, so each replica takes its turn
    for i in range(6):
        assert router.post(body(png(i))).status_code == 200
    assert [r.stats()["total_requests"] for r in replicas] == [2, 2, 2]
    # many at once: the fewest outstanding first
    answers = concurrently(lambda i: router.post(body(png(100 + i))), list(range(30)))
    assert all(isinstance(a, httpx.Response) and a.status_code == 200 for a in answers), answers
    for i, a in enumerate(answers):  # each answer is its own page's
        assert a.json()["choices"][0]["message"]["content"] == expected_output(png(100 + i))
    counts = [r.stats()["total_requests"] - 2 for r in replicas]
    assert sum(counts) == 30 and min(counts) >= 5, counts
    models = httpx.get(router.url + "/models", timeout=5).json()
    assert models["data"][0]["id"] == "chandra"


def test_streaming_passes_through_event_by_event(cluster):
    (replica,), router = cluster(1, token_delay_s=0.02, chunk_chars=8)
    img = png(7)
    t0, times, text = time.monotonic(), [], []
    with httpx.stream("POST", router.url + "/chat/completions", json=body(img, stream=True), timeout=30) as r:
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
        for line in r.iter_lines():
            if line.startswith("data: ") and line != "data: [DONE]":
                times.append(time.monotonic() - t0)
                text += [c["delta"].get("content") or "" for c in json.loads(line[6:])["choices"]]
    assert "".join(text) == expected_output(img)
    # the first events arrive while the replica is still answering, not all at the end
    assert len(times) > 20 and times[0] < times[-1] / 2, (times[0], times[-1])
    assert replica.stats()["completed"] == 1


def test_a_killed_replica_is_routed_around_and_back_after_its_restart(cluster):
    (a, b), router = cluster(2, delay_s=1.0)
    results: list = []
    sender = threading.Thread(
        target=lambda: results.extend(concurrently(lambda i: router.post(body(png(200 + i))), list(range(10))))
    )
    sender.start()
    assert wait_until(lambda: a.stats()["in_flight"] >= 3, 20)
    a.proc.kill()  # mid-answer: nothing had come back, so its requests go to b
    a.proc.wait()
    sender.join(120)
    assert len(results) == 10 and all(isinstance(r, httpx.Response) and r.status_code == 200 for r in results), results
    for i, r in enumerate(results):
        assert r.json()["choices"][0]["message"]["content"] == expected_output(png(200 + i))
    assert b.stats()["completed"] == 10
    state = router.replicas()
    assert not state[0]["healthy"] and state[0]["failures"] >= 3 and state[1]["healthy"]
    assert router.health() == 200
    assert router.post(body(png(1))).status_code == 200 and b.stats()["completed"] == 11
    # restarted on its port: back in rotation at the next health check
    a2 = cluster.restart(a)
    assert wait_until(lambda: router.replicas()[0]["healthy"], 10)
    for i in range(4):
        assert router.post(body(png(300 + i))).status_code == 200
    assert a2.stats()["total_requests"] == 2 and b.stats()["completed"] == 13
    assert "replica 0" in router.log.read_text() and "back in rotation" in router.log.read_text()


def test_no_healthy_replica_is_a_503_and_health_says_so(cluster):
    (a,), router = cluster(1)
    a.proc.kill()
    a.proc.wait()
    assert wait_until(lambda: router.health() == 503, 10)
    r = router.post(body(png(1)))
    assert r.status_code == 503 and r.headers["retry-after"] == "1" and "no healthy" in r.json()["error"]["message"]


def test_errors_pass_through_and_a_broken_answer_breaks_the_clients(cluster):
    (a,), router = cluster(1, default_plan=["500", "drop"])
    r = router.post(body(png(1)))
    assert r.status_code == 500 and a.stats()["total_requests"] == 1  # vLLM's answer, not retried here
    with pytest.raises(httpx.HTTPError):  # the replica dropped the connection mid-answer: so does the router
        router.post(body(png(1)))
    assert router.post(body(png(1))).status_code == 200
    assert router.replicas()[0]["healthy"] and router.health() == 200


def test_a_client_that_leaves_closes_its_upstream_request(cluster):
    (a,), router = cluster(1, token_delay_s=0.05)
    with httpx.stream("POST", router.url + "/chat/completions", json=body(png(3), stream=True), timeout=30) as r:
        for line in r.iter_lines():
            if line.startswith("data: "):
                break
    # the router let its upstream request go at once (vLLM aborts a request whose connection closes; the
    # stand-in does not notice and streams on for its ~15 s)
    assert wait_until(lambda: router.replicas()[0]["outstanding"] == 0, 3)
    assert a.stats()["in_flight"] == 1 and a.stats()["completed"] == 0
    a.control(token_delay_s=0.0)
    assert router.post(body(png(4))).status_code == 200
    a.proc.kill()  # rather than wait for its abandoned stream at teardown


def test_metrics_are_every_replicas_labelled(cluster):
    replicas, router = cluster(2)
    text = httpx.get(router.root + "/metrics", timeout=5).text
    for i in (0, 1):
        assert f'vllm:num_requests_running{{replica="{i}",model_name="chandra"}} 0.0' in text
        assert f'ocrserve_router_replica_healthy{{replica="{i}",url="{replicas[i].root}"}} 1' in text
    assert text.count("# TYPE vllm:num_requests_running gauge") == 1


def test_merge_metrics_groups_each_family():
    page = (
        '# HELP h a histogram\n# TYPE h histogram\nh_bucket{le="1.0"} 2.0\nh_bucket{le="+Inf"} 3.0\n'
        "h_sum 4.5\nh_count 3.0\n# HELP c a counter\n# TYPE c counter\nc_total 7.0\nuntyped 1\n"
    )
    merged = merge_metrics([(0, page), (1, page)]).splitlines()
    assert merged[:2] == ["# HELP h a histogram", "# TYPE h histogram"]
    assert merged[2:10] == [
        'h_bucket{replica="0",le="1.0"} 2.0',
        'h_bucket{replica="0",le="+Inf"} 3.0',
        'h_sum{replica="0"} 4.5',
        'h_count{replica="0"} 3.0',
        'h_bucket{replica="1",le="1.0"} 2.0',
        'h_bucket{replica="1",le="+Inf"} 3.0',
        'h_sum{replica="1"} 4.5',
        'h_count{replica="1"} 3.0',
    ]
    assert merged[12:] == [
        'c_total{replica="0"} 7.0',
        'c_total{replica="1"} 7.0',
        'untyped{replica="0"} 1',
        'untyped{replica="1"} 1',
    ]
    assert merge_metrics([]) == ""


def test_the_router_relays_through_httpx2():
    # httpx 0.x's pool walks its connection list for each request: with a GPU host's pages in flight that was
    # several ms of the router's CPU a page (bench/results/router-http2x-2026-12-07/)
    assert router_httpx.__name__ == "httpx2"
    assert isinstance(Router(["http://a"]).client, router_httpx.AsyncClient)


def test_a_5xx_or_no_answer_on_health_takes_a_replica_out_and_200_puts_it_back():
    answers = {"http://a": 200, "http://b": 503}

    lib = router_httpx  # the router's own client library (httpx2), its mock transport and errors

    def handler(request):
        status = answers[f"{request.url.scheme}://{request.url.host}"]
        if status == 0:
            raise lib.ConnectError("refused", request=request)
        return lib.Response(status)

    async def go() -> list[list[bool]]:
        router = Router(["http://a", "http://b/"])
        router._client = lib.AsyncClient(transport=lib.MockTransport(handler))
        seen = []
        for a, b in [(200, 503), (0, 200), (200, 200)]:
            answers.update({"http://a": a, "http://b": b})
            await router.check_all()
            seen.append([r.healthy for r in router.replicas])
        assert router.pick(set()) is not None and router.replicas[1].url == "http://b"
        await router.shutdown()
        return seen

    assert asyncio.run(go()) == [[True, False], [False, True], [True, True]]


def test_convert_through_the_router_loses_no_page_when_a_replica_dies(cluster, tmp_path):
    """`ocrserve convert --server <router>` of a 12-page PDF while one replica is killed mid-run: every page ok."""
    (a, b), router = cluster(2, delay_s=0.5)
    pdf = text_pdf(tmp_path / "doc.pdf", pages=12)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    conv = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "ocrserve",
            "convert",
            str(pdf),
            "-o",
            str(tmp_path / "out"),
            "--server",
            router.url,
            "-c",
            "4",
            "-q",
        ],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert wait_until(lambda: a.stats()["in_flight"] >= 1 and b.stats()["total_requests"] >= 1, 60)
    a_done = a.stats()["completed"]
    a.proc.kill()
    a.proc.wait()
    out, _ = conv.communicate(timeout=180)
    assert conv.returncode == 0, out
    doc = json.loads((tmp_path / "out" / "doc" / "doc.json").read_text())
    assert [p["status"] for p in doc["pages"]] == ["ok"] * 12
    assert all(p["engine"] == "openai" for p in doc["pages"])
    assert b.stats()["completed"] + a_done >= 12 and router.replicas()[0]["failures"] >= 1
