"""Client CPU of one openai-engine request (issue 28 item 5): pages straight to `OpenAIEngine.ocr` against
the stand-in server (instant answers), `time.process_time()` of this process around N pages, per page.

    python bench/openai_request_cpu.py --pages 300 --rounds 5            # this tree
    python bench/openai_request_cpu.py --code /tmp/before --pages 300   # another tree's ocrserve/

`--code DIR` puts DIR first on sys.path (a `git archive` of an earlier commit: the code before).
`--compare DIR` runs this tree and DIR in turn, each round a fresh process of each, and prints the medians.
`--stream` streams every answer (an on_delta callback). `--profile FILE` writes a cProfile of one round.
Connections: the client's connects are counted (httpcore's AsyncConnection opening a socket), so a
keep-alive that is not used shows as one connect a request.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def page_png(seed: int, w: int = 1088, h: int = 1408) -> bytes:
    """A gray page PNG of some 150-250 KB (text-like noise on white), different per seed."""
    import io

    import numpy as np
    from PIL import Image

    rng = np.random.default_rng(seed)
    a = np.full((h, w), 255, np.uint8)
    for y in range(60, h - 60, 28):
        xs = rng.integers(40, w - 200)
        a[y : y + 12, xs : xs + rng.integers(100, 800)] = rng.integers(0, 120, (12, 1), dtype=np.uint8)
        a[y : y + 12, 40 : w - 40] &= rng.integers(0, 2, (12, w - 80), dtype=np.uint8) * 255 | 0x3F
    buf = io.BytesIO()
    Image.fromarray(a, "L").save(buf, format="PNG", compress_level=1)
    return buf.getvalue()


def one_round(url: str, pages: int, concurrency: int, stream: bool, profile: str | None) -> dict:
    import asyncio

    import httpcore

    from ocrserve.engines.base import PageInput
    from ocrserve.engines.openai import OpenAIEngine

    connects = [0]
    orig = httpcore.AsyncHTTPConnection._connect

    async def counted(self, request):
        connects[0] += 1
        return await orig(self, request)

    httpcore.AsyncHTTPConnection._connect = counted  # type: ignore[method-assign]
    pngs = [page_png(i) for i in range(8)]
    inputs = [
        PageInput("doc", i, png=pngs[i % len(pngs)] + bytes(i // len(pngs)), image_size=(1088, 1408))
        for i in range(pages + 2 * concurrency)
    ]
    eng = OpenAIEngine("chandra-1", server=url, served_model="chandra", concurrency=concurrency)
    sink = [] if stream else None

    async def run(batch: list) -> None:
        sem = asyncio.Semaphore(concurrency)

        async def one(p):
            async with sem:
                r = await eng.ocr(p, on_delta=sink.append if sink is not None else None)
                assert r.ok, r.error

        await asyncio.gather(*(one(p) for p in batch))

    async def main() -> dict:
        await run(inputs[: 2 * concurrency])  # warm: connections, imports, templates
        c0 = connects[0]
        prof = None
        if profile:
            import cProfile

            prof = cProfile.Profile(time.process_time)
            prof.enable()
        t0, w0 = time.process_time(), time.perf_counter()
        await run(inputs[2 * concurrency :])
        cpu, wall = time.process_time() - t0, time.perf_counter() - w0
        if prof is not None:
            prof.disable()
            prof.dump_stats(profile)
        await eng.aclose()
        return {
            "cpu_ms_per_page": 1000 * cpu / pages,
            "wall_ms_per_page": 1000 * wall / pages,
            "connects": connects[0] - c0,
        }

    return asyncio.run(main())


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--code", help="the tree whose ocrserve/ is measured (default: this one)")
    ap.add_argument("--compare", help="a tree to compare with this one, interleaved, --rounds processes each")
    ap.add_argument("--pages", type=int, default=300)
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--stream", action="store_true")
    ap.add_argument("--url", help="a running stand-in's /v1 URL (default: one is started)")
    ap.add_argument("--profile", help="cProfile of the round to this file")
    a = ap.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    if a.code:
        sys.path.insert(0, a.code)
    if a.url is None:
        from tests.fakes.standin import start_standin

        with start_standin() as s:
            return main([*(argv if argv is not None else sys.argv[1:]), "--url", s.url])
    if a.compare:
        base = [sys.executable, __file__, "--url", a.url, "--pages", str(a.pages), "--rounds", "1"]
        base += ["--concurrency", str(a.concurrency)] + (["--stream"] if a.stream else [])
        runs: dict[str, list[dict]] = {"before": [], "after": []}
        for _ in range(a.rounds):
            for name, code in (("before", a.compare), ("after", str(ROOT))):
                out = subprocess.run([*base, "--code", code], capture_output=True, text=True, check=True).stdout
                runs[name].append(json.loads(out.strip().splitlines()[-1])["rounds"][0])
        summary = {
            name: {
                "cpu_ms_per_page": [round(r["cpu_ms_per_page"], 3) for r in rs],
                "median_cpu_ms": round(statistics.median(r["cpu_ms_per_page"] for r in rs), 3),
                "connects": [r["connects"] for r in rs],
            }
            for name, rs in runs.items()
        }
        print(json.dumps(summary, indent=1))
        return
    rounds = [one_round(a.url, a.pages, a.concurrency, a.stream, a.profile) for _ in range(a.rounds)]
    print(json.dumps({"code": a.code or str(ROOT), "rounds": rounds}))


if __name__ == "__main__":
    main()
