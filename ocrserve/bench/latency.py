"""Where the time to a page's first block goes on an idle server (issue #28's 200 ms goal), one request at
a time, streamed, each kind `repeats` times after one warm-up request:

- `text`: the prompt alone, no image: the API server, the scheduler, one prefill of ~100 tokens, the
  first token;
- `tiny`: the prompt and a 56x56 image (4 visual tokens): plus the image path's fixed costs (decode,
  processor, a vision tower step);
- `page`: the prompt and a standard page (1632x2112, ~3,400 visual tokens), pre-encoded: plus the page's
  preprocessing in the API server, its vision tower and its prefill;
- `page_stored`, `page_bmp`: the same pages' pixels in a PNG whose deflate blocks are stored (not
  compressed) and in a BMP: what the API server saves decoding the page (its PIL decode of a compressed
  PNG is single-threaded) against the bigger request;
- the page's token times: to its first token, and to its `block_tokens`-th (a first block of Chandra's
  output, `<div data-bbox=".." data-label="Section-Header"><h1>Title</h1></div>`, is about 40 tokens).

Each request body is serialized before its clock starts (the client's JSON encoding is not the server's).

The server's own view of the same requests (vLLM's /metrics deltas: queue, prefill and first-token
times) is taken per kind, so API-side preprocessing (TTFT seen by the client minus vLLM's queue +
prefill) and the engine's part are told apart. The client's part (render, fit, encode a page) is the
bench's `stages` mode.
"""

from __future__ import annotations

import io
import json
import statistics
import time
from typing import Any

import httpx

from ocrserve.bench.load import _scrape, metrics_delta
from ocrserve.engines import chat
from ocrserve.png import encode_pixels
from ocrserve.profiles import Profile

# tokens of a typical first block of Chandra's output (a section header with its box and label)
BLOCK_TOKENS = 40


def _tiny_png() -> bytes:
    from PIL import Image

    buf = io.BytesIO()
    Image.new("RGB", (56, 56), "white").save(buf, format="PNG")
    return buf.getvalue()


KINDS = ("text", "tiny", "page", "page_stored", "page_bmp")


def page_encodings(png: bytes) -> dict[str, tuple[bytes, str]]:
    """A page PNG's pixels in each encoding the probe compares: (bytes, MIME type) by kind."""
    import numpy as np
    from PIL import Image

    img = Image.open(io.BytesIO(png))
    img.load()
    bmp = io.BytesIO()
    img.save(bmp, format="BMP")
    stored = encode_pixels(np.asarray(img.convert("RGB") if img.mode not in ("L", "RGB") else img), stored=True)
    return {"page": (png, "image/png"), "page_stored": (stored, "image/png"), "page_bmp": (bmp.getvalue(), "image/bmp")}


def probe_bodies(model: str, profile: Profile, page_png: bytes, max_tokens: int) -> dict[str, dict[str, Any]]:
    """The request of each kind: the engines' Chandra request (engines/chat.py), streamed, fixed length."""

    def body(image: bytes | None, mime: str = "image/png") -> dict[str, Any]:
        url = chat.data_url(image or _tiny_png(), mime)
        return chat.body(model, url, profile.prompt, profile.sampling, max_tokens, stream=True, ignore_eos=True)

    text = body(None)
    # the same message without its image part
    for m in text["messages"]:
        if isinstance(m.get("content"), list):
            m["content"] = [p for p in m["content"] if p.get("type") == "text"]
    pages = {kind: body(image, mime) for kind, (image, mime) in page_encodings(page_png).items()}
    return {"text": text, "tiny": body(None), **pages}


async def _one(client: httpx.AsyncClient, url: str, body: dict[str, Any], block_tokens: int) -> dict[str, float]:
    content = json.dumps(body).encode()
    headers = {"content-type": "application/json"}
    t0 = time.perf_counter()
    first = block = None
    n = 0
    async with client.stream("POST", url, content=content, headers=headers) as r:
        r.raise_for_status()
        async for line in r.aiter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            try:
                delta = json.loads(line[6:])["choices"][0]["delta"].get("content")
            except (ValueError, KeyError, IndexError):
                continue
            if not delta:
                continue
            n += 1  # vLLM streams a delta a token (random weights: no multi-token merges to speak of)
            now = time.perf_counter() - t0
            if first is None:
                first = now
            if n == block_tokens and block is None:
                block = now
    out = {"ttft_s": first if first is not None else float("nan"), "tokens": n}
    if block is not None:
        out["block_s"] = block
    return out


async def latency_probe(
    endpoint: str,
    model: str,
    profile: Profile,
    page_pngs: list[bytes],
    *,
    block_tokens: int = BLOCK_TOKENS,
    timeout_s: float = 300,
) -> dict[str, Any]:
    """Per kind: median time to first token (and, for pages, to the `block_tokens`-th token) over one
    request per page of `page_pngs` after a warm-up, plus vLLM's per-request stage means for those requests."""
    if not page_pngs:
        raise ValueError("the latency probe needs at least one page")
    url = endpoint.rstrip("/") + "/chat/completions"
    root = endpoint[: -len("/v1")] if endpoint.endswith("/v1") else endpoint
    out: dict[str, Any] = {"block_tokens": block_tokens, "repeats": len(page_pngs)}
    async with httpx.AsyncClient(timeout=timeout_s) as client:
        warm = probe_bodies(model, profile, page_pngs[0], block_tokens)
        bodies = [probe_bodies(model, profile, png, block_tokens) for png in page_pngs]
        for kind in KINDS:
            try:
                await _one(client, url, warm[kind], block_tokens)
                before = await _scrape(client, [root])
                runs = [await _one(client, url, b[kind], block_tokens) for b in bodies]
            except httpx.HTTPError as e:  # a kind the server refuses is a result; the others go on
                out[kind] = {"error": f"{type(e).__name__}: {e}"[:300]}
                continue
            after = await _scrape(client, [root])
            rec: dict[str, Any] = {
                "body_bytes": len(json.dumps(bodies[0][kind])),
                "ttft_s": [round(r["ttft_s"], 4) for r in runs],
                "ttft_median_s": round(statistics.median(r["ttft_s"] for r in runs), 4),
                "server": metrics_delta(before, after),
            }
            blocks = [r["block_s"] for r in runs if "block_s" in r]
            if blocks:
                rec["block_median_s"] = round(statistics.median(blocks), 4)
                itl = [(r["block_s"] - r["ttft_s"]) / (block_tokens - 1) for r in runs if "block_s" in r]
                rec["inter_token_s"] = round(statistics.median(itl), 5)
            out[kind] = rec
    page_srv = out["page"].get("server") or {}
    if page_srv.get("ttft_s") is not None and "ttft_median_s" in out["text"] and "ttft_median_s" in out["tiny"]:
        out["split_s"] = {
            "client_seen_ttft": out["page"]["ttft_median_s"],
            "engine_queue": page_srv.get("queue_s"),
            "engine_prefill (vision + prefill + first token)": page_srv.get("prefill_s"),
            "api_server and transport (client TTFT - vLLM's TTFT)": round(
                out["page"]["ttft_median_s"] - page_srv["ttft_s"], 4
            ),
            "image path over text alone (page - text, client)": round(
                out["page"]["ttft_median_s"] - out["text"]["ttft_median_s"], 4
            ),
            "page over tiny image (client)": round(out["page"]["ttft_median_s"] - out["tiny"]["ttft_median_s"], 4),
            "first block after first token": round(
                (out["page"].get("block_median_s") or float("nan")) - out["page"]["ttft_median_s"], 4
            ),
        }
    return out
