"""The benchmark's clients, each timing one way of sending the same pages to one server:

- `pipeline`: ocrserve's pipeline (what `ocrserve convert --server` does);
- `plain`: what the Chandra CLI does (render + PNG a batch in the main process, send it, wait, parse);
- `ceiling`: pre-rendered, pre-encoded requests at full concurrency, answers not parsed;
- a streaming probe: time to first token and to first closed block on an idle server.
"""

from __future__ import annotations

import asyncio
import io
import json
import re
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from ocrserve.bench.sampling import client_cpu_s, pct
from ocrserve.engines import chat
from ocrserve.profiles import Profile


@dataclass
class ModeResult:
    mode: str
    pages: int = 0
    failed: int = 0
    wall_s: float = 0.0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latencies: list[float] = field(default_factory=list)
    cpu_s: float = 0.0
    sampler: dict[str, Any] = field(default_factory=dict)
    notes: str = ""

    def row(self) -> dict[str, Any]:
        return {
            "mode": self.mode,
            "pages": self.pages,
            "failed": self.failed,
            "wall_s": round(self.wall_s, 2),
            "pages_per_s": round(self.pages / self.wall_s, 3) if self.wall_s else None,
            "prompt_tokens_per_s": round(self.prompt_tokens / self.wall_s, 1) if self.wall_s else None,
            "output_tokens_per_s": round(self.completion_tokens / self.wall_s, 1) if self.wall_s else None,
            "latency_p50_s": pct(self.latencies, 50),
            "latency_p95_s": pct(self.latencies, 95),
            "latency_p99_s": pct(self.latencies, 99),
            "client_cpu_s_per_page": round(self.cpu_s / self.pages, 4) if self.pages else None,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            **{k: v for k, v in self.sampler.items() if k != "queue_series"},
            "queue_series": self.sampler.get("queue_series"),
            "notes": self.notes,
        }


# ------------------------------------------------------------------------------------ clients


def _root(server: str) -> str:
    from ocrserve.engines.openai import normalize_base_url

    return normalize_base_url(server)[: -len("/v1")]


def _served_model(server: str, api_key: str | None) -> str:
    from ocrserve.engines.openai import normalize_base_url

    r = httpx.get(normalize_base_url(server) + "/models", headers=_auth(api_key), timeout=30)
    r.raise_for_status()
    return r.json()["data"][0]["id"]


def _auth(api_key: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {api_key}"} if api_key else {}


@dataclass(frozen=True)
class Load:
    """What every mode's requests go to and ask for: the server, the profile, the answer's length, the key."""

    server: str
    profile: Profile
    max_tokens: int
    ignore_eos: bool
    api_key: str | None

    @property
    def url(self) -> str:
        """The server's chat completions URL."""
        from ocrserve.engines.openai import normalize_base_url

        return normalize_base_url(self.server) + "/chat/completions"

    def served_model(self) -> str:
        return _served_model(self.server, self.api_key)

    def engine_options(self) -> dict[str, Any]:
        """The openai engine's options for these requests (the pipeline mode's)."""
        return {k: getattr(self, k) for k in ("server", "api_key", "max_tokens", "ignore_eos")}

    def body(self, model: str, png: bytes, stream: bool = False) -> dict:
        return _body(model, self.profile, png, self.max_tokens, self.ignore_eos, stream)


def _body(model: str, profile: Profile, png: bytes, max_tokens: int, ignore_eos: bool, stream: bool = False) -> dict:
    """The engines' Chandra request (engines/chat.py), byte for byte what the openai engine sends."""
    return chat.body(
        model,
        chat.data_url(png, "image/png"),
        profile.prompt,
        profile.sampling,
        max_tokens,
        stream=stream,
        ignore_eos=ignore_eos,
    )


async def run_pipeline(files: list[Path], load: Load, *, concurrency: int, out_dir: Path) -> ModeResult:
    from ocrserve.pipeline.local import Converter

    res = ModeResult("pipeline")
    cpu0 = client_cpu_s()
    conv = Converter(
        engine="openai",
        model=load.profile,
        output_dir=out_dir,
        force=True,
        fallback=False,
        concurrency=concurrency,
        **load.engine_options(),
    )
    t0 = time.perf_counter()
    try:
        summary = await conv.run([str(f) for f in files])
    finally:
        res.wall_s = time.perf_counter() - t0
        res.cpu_s = client_cpu_s() - cpu0
        await conv.aclose()
    for r in summary.results:
        if r.document is None:
            res.failed += 1
            continue
        for p in r.document.pages:
            res.pages += 1
            res.failed += p.status == "failed"
            res.prompt_tokens += p.prompt_tokens or 0
            res.completion_tokens += p.completion_tokens or 0
            if p.timings.engine_s is not None:
                res.latencies.append(p.timings.engine_s)
    return res


def _render_plain(path: str, index: int, profile: Profile) -> bytes:
    """The Chandra CLI's way: render at the profile's dpi, then PNG at the default compression."""
    import pypdfium2 as pdfium

    from ocrserve.ingest.raster import Budget, pdf_target

    doc = pdfium.PdfDocument(path)
    try:
        page = doc[index]
        w, h = page.get_size()
        W, H = pdf_target(w, h, Budget.from_profile(profile))
        scale = max(profile.pdf_dpi / 72, W / w)
        img = page.render(scale=scale).to_pil().convert("RGB")
        if img.size != (W, H):
            img = img.resize((W, H))
        buf = io.BytesIO()
        img.save(buf, format="PNG")
        return buf.getvalue()
    finally:
        doc.close()


def _page_list(files: list[Path]) -> list[tuple[str, int]]:
    import pypdfium2 as pdfium

    out: list[tuple[str, int]] = []
    for f in files:
        doc = pdfium.PdfDocument(str(f))
        out.extend((str(f), i) for i in range(len(doc)))
        doc.close()
    return out


def run_plain(files: list[Path], load: Load, *, batch: int, max_pages: int | None = None) -> ModeResult:
    """max_pages: only the corpus's first pages (the plain client's rate is one batch's at a time, the
    same over 4 batches as over 40: the slow mode need not take the whole corpus)."""
    from ocrserve.parse import parse_output

    res = ModeResult(
        "plain",
        notes=f"render + PNG (default level) in the main process, {batch} requests per batch, "
        "next batch after the whole batch",
    )
    url, model, profile = load.url, load.served_model(), load.profile
    pages = _page_list(files)
    if max_pages is not None and max_pages < len(pages):
        pages = pages[:max_pages]
        res.notes += f"; the corpus's first {len(pages)} pages"
    cpu0 = client_cpu_s()
    t0 = time.perf_counter()
    with httpx.Client(timeout=3600, headers=_auth(load.api_key)) as client, ThreadPoolExecutor(batch) as ex:

        def send(png: bytes) -> tuple[dict | None, float]:
            t = time.perf_counter()
            try:
                r = client.post(url, json=load.body(model, png))
                r.raise_for_status()
                return r.json(), time.perf_counter() - t
            except httpx.HTTPError:
                return None, time.perf_counter() - t

        for i in range(0, len(pages), batch):
            chunk = pages[i : i + batch]
            pngs = [_render_plain(p, j, profile) for p, j in chunk]
            for data, lat in ex.map(send, pngs):
                res.pages += 1
                res.latencies.append(lat)
                if data is None:
                    res.failed += 1
                    continue
                usage = data.get("usage") or {}
                res.prompt_tokens += usage.get("prompt_tokens") or 0
                res.completion_tokens += usage.get("completion_tokens") or 0
                parse_output(data["choices"][0]["message"]["content"] or "", profile, (612, 792))
    res.wall_s = time.perf_counter() - t0
    res.cpu_s = client_cpu_s() - cpu0
    return res


async def _prerender(files: list[Path], profile: Profile) -> list[bytes]:
    from ocrserve.ingest.pool import ResilientPool, default_workers
    from ocrserve.ingest.raster import Budget, render_page

    pool = ResilientPool(default_workers())
    budget = Budget.from_profile(profile)
    try:
        rps = await asyncio.gather(
            *[pool.run(render_page, p, "pdf", i, budget, None, 10**9) for p, i in _page_list(files)]
        )
    finally:
        pool.shutdown()
    return [rp.png for rp in rps]


async def run_ceiling(pngs: list[bytes], load: Load, *, concurrency: int) -> ModeResult:
    res = ModeResult(
        "ceiling", notes="pre-rendered, pre-encoded bodies; all pages at full concurrency; answers not parsed"
    )
    url, model = load.url, await asyncio.to_thread(load.served_model)
    bodies = [json.dumps(load.body(model, png)).encode() for png in pngs]
    sem = asyncio.Semaphore(concurrency)
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    cpu0 = client_cpu_s()
    async with httpx.AsyncClient(
        timeout=3600, limits=limits, headers={**_auth(load.api_key), "content-type": "application/json"}
    ) as client:

        async def one(body: bytes) -> None:
            async with sem:
                t = time.perf_counter()
                try:
                    r = await client.post(url, content=body)
                    r.raise_for_status()
                    usage = r.json().get("usage") or {}
                    res.prompt_tokens += usage.get("prompt_tokens") or 0
                    res.completion_tokens += usage.get("completion_tokens") or 0
                except httpx.HTTPError:
                    res.failed += 1
                res.latencies.append(time.perf_counter() - t)
                res.pages += 1

        t0 = time.perf_counter()
        await asyncio.gather(*[one(b) for b in bodies])
        res.wall_s = time.perf_counter() - t0
    res.cpu_s = client_cpu_s() - cpu0
    return res


async def streaming_probe(pngs: list[bytes], load: Load) -> dict[str, Any]:
    """Time to first token and to first closed block, one streamed page at a time on an idle server."""
    url, model = load.url, await asyncio.to_thread(load.served_model)
    ttft, ttfb = [], []
    async with httpx.AsyncClient(timeout=600, headers=_auth(load.api_key)) as client:
        for png in pngs:
            t0 = time.perf_counter()
            first = block = None
            text = ""
            async with client.stream("POST", url, json=load.body(model, png, stream=True)) as r:
                async for line in r.aiter_lines():
                    if not line.startswith("data: ") or line == "data: [DONE]":
                        continue
                    try:
                        delta = json.loads(line[6:])["choices"][0]["delta"].get("content") or ""
                    except (ValueError, KeyError, IndexError):
                        continue
                    if delta and first is None:
                        first = time.perf_counter() - t0
                    text += delta
                    if block is None and re.search(r"</div\s*>", text, re.I):
                        block = time.perf_counter() - t0
            if first is not None:
                ttft.append(first)
            if block is not None:
                ttfb.append(block)
    return {
        "pages": len(pngs),
        "ttft_s": [round(x, 3) for x in ttft],
        "ttft_median_s": pct(ttft, 50),
        "first_block_s": [round(x, 3) for x in ttfb],
        "first_block_median_s": pct(ttfb, 50),
        "note": "first block: time until the first </div> closes in the stream (none with a weightless model's random text)",
    }
