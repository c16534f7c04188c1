"""200 concurrent clients against a saturated engine: only 200/202/429, never a 5xx, no job lost."""

from __future__ import annotations

import asyncio
import time
from collections import Counter

import httpx

from tests.fakes.standin import StandIn
from tests.support.api import KEYS, ApiProcess
from tests.support.helpers import image

CLIENTS = 200


def test_200_concurrent_clients_get_200_202_or_429_and_every_job_completes(
    api: ApiProcess, standin: StandIn, tmp_path
) -> None:
    # the engine is saturated: it runs 4 requests at a time, each taking a while; the rest wait
    standin.control(max_concurrency=4, delay_s=0.05)
    files = [image(tmp_path / f"p{i}.png", size=(320, 240), text=f"client {i}").read_bytes() for i in range(8)]

    async def client(c: httpx.AsyncClient, i: int) -> tuple[str, int, dict | None, dict]:
        headers = {"Authorization": f"Bearer {KEYS[i % len(KEYS)]}"}
        path = "/v1/jobs" if i % 2 else "/v1/convert"
        r = await c.post(path, files={"file": (f"p{i}.png", files[i % len(files)], "image/png")}, headers=headers)
        body = r.json() if r.headers.get("content-type", "").startswith("application/json") else None
        return path, r.status_code, body, dict(r.headers)

    async def main():
        limits = httpx.Limits(max_connections=CLIENTS, max_keepalive_connections=CLIENTS)
        async with httpx.AsyncClient(base_url=api.url, timeout=90, limits=limits) as c:
            return await asyncio.wait_for(asyncio.gather(*(client(c, i) for i in range(CLIENTS))), timeout=100)

    t0 = time.monotonic()
    results = asyncio.run(main())
    codes = Counter((p, s) for p, s, _, _ in results)
    assert all(s in (200, 202, 429) for _, s, _, _ in results), codes
    assert codes[("/v1/convert", 200)] >= 1 and codes[("/v1/jobs", 202)] >= 1, codes
    for path, status, body, headers in results:
        if status == 429:
            assert int(headers["retry-after"]) >= 1
        elif path == "/v1/convert":
            assert len(body["pages"]) == 1 and body["pages"][0]["status"] == "ok" and body["pages"][0]["blocks"]

    # every accepted job completes, with its page
    jobs = [(body["id"], i) for i, (path, status, body, _) in enumerate(results) if status == 202]
    pending = dict(jobs)
    c = httpx.Client(base_url=api.url, timeout=30)
    deadline = time.monotonic() + 90
    while pending and time.monotonic() < deadline:
        for jid, i in list(pending.items()):
            j = c.get(f"/v1/jobs/{jid}", headers={"Authorization": f"Bearer {KEYS[i % len(KEYS)]}"}).json()
            if j["status"] in ("done", "failed"):
                assert j["status"] == "done" and j["pages_done"] == 1 and j["pages_failed"] == 0, j
                del pending[jid]
        time.sleep(0.2)
    assert not pending, f"{len(pending)} of {len(jobs)} jobs unfinished"
    for jid, i in jobs[:10]:
        doc = c.get(f"/v1/jobs/{jid}/result", headers={"Authorization": f"Bearer {KEYS[i % len(KEYS)]}"}).json()
        assert doc["pages"][0]["status"] == "ok" and doc["pages"][0]["blocks"]
    metrics = c.get("/metrics").text
    assert "ocrserve_queue_depth 0.0" in metrics
    assert standin.stats()["max_running"] <= 4
    print(f"{CLIENTS} clients: {dict(codes)} in {time.monotonic() - t0:.1f} s")
