"""Client CPU per page, stage by stage: the pipeline's own functions run one page at a time in this
process against a live server, each stage timed with the process's CPU clock.

Stages: `render` (pdfium to the exact target size, RGB pixels), `encode` (the page image as PNG), `request`
(base64, the JSON body as the openai engine splices it, the HTTP exchange and reading the answer:
the client's side only, the server is another process), `parse` (raw model HTML -> blocks, what the
render workers run), `figures` (the figure blocks' crops cut from the page's PNG and written, as the
pipeline does for a run that writes figures), `outputs` (Markdown, HTML and JSON of the document written,
per page).
Against the stand-in server (instant answers) the sum is what the client spends per page.
"""

from __future__ import annotations

import base64
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from ocrserve.bench.clients import _auth, _page_list, _served_model
from ocrserve.engines import chat
from ocrserve.profiles import Profile

STAGES = ("render", "encode", "request", "parse", "figures", "outputs")


def _template(model: str, profile: Profile, max_tokens: int, ignore_eos: bool) -> tuple[bytes, bytes]:
    """The openai engine's request template (engines/chat.py): head + base64 PNG + tail."""
    return chat.BodyTemplate(profile.prompt, ignore_eos=ignore_eos).parts(
        model, profile.sampling, max_tokens, False, "image/png"
    )


def stage_profile(
    files: list[Path],
    server: str,
    profile: Profile,
    *,
    max_pages: int = 40,
    max_tokens: int = 1024,
    ignore_eos: bool = True,
    api_key: str | None = None,
) -> dict[str, Any]:
    """Median and mean CPU milliseconds per page of each stage over up to `max_pages` pages."""
    from ocrserve.document import Document, Source
    from ocrserve.engines.openai import normalize_base_url
    from ocrserve.ingest.raster import Budget, encode_pixels, forget, pdf_page_pixels
    from ocrserve.labels import FIGURE_LABELS
    from ocrserve.pipeline.output import write_document
    from ocrserve.pipeline.page import finish_page
    from ocrserve.render.figures import crop_figures_png

    url = normalize_base_url(server) + "/chat/completions"
    model = _served_model(server, api_key)
    head, tail = _template(model, profile, max_tokens, ignore_eos)
    budget = Budget.from_profile(profile)
    pages = _page_list(files)[:max_pages]
    cpu: dict[str, list[float]] = {s: [] for s in STAGES}
    done = []
    sizes: list[int] = []
    out = Path(tempfile.mkdtemp(prefix="ocrserve-stages-"))
    (out / "figures").mkdir()
    clock = time.thread_time  # this thread's CPU: the samplers' threads of a long-running bench stay out
    try:
        with httpx.Client(timeout=600, headers={**_auth(api_key), "content-type": "application/json"}) as client:
            for path, i in pages:
                t = clock()
                px, w, h = pdf_page_pixels(path, i, budget)
                t1 = clock()
                png = encode_pixels(px)
                t2 = clock()
                sizes.append(len(png))
                r = client.post(url, content=head + base64.b64encode(png) + tail)
                r.raise_for_status()
                raw = r.json()["choices"][0]["message"]["content"] or ""
                t3 = clock()
                page = finish_page(
                    raw,
                    profile,
                    index=i,
                    width=w,
                    height=h,
                    unit="pt",
                    image_size=(px.shape[1], px.shape[0]),
                    png=png,
                    staging=None,
                    prefix=f"p{i}",
                )
                t4 = clock()
                if any(b.label in FIGURE_LABELS for b in page.blocks):
                    crop_figures_png(page, png, out / "figures", f"p{i}")
                t5 = clock()
                for s, v in zip(STAGES, (t1 - t, t2 - t1, t3 - t2, t4 - t3, t5 - t4)):
                    cpu[s].append(v)
                done.append(page)
            for f in {p for p, _ in pages}:
                forget(f)
        t = clock()
        doc = Document(
            source=Source(path=str(pages[0][0]) if pages else "-", type="pdf", page_count=len(done)),
            model=profile.name,
            pages=done,
        )
        write_document(doc, out, "stages")
        per = (clock() - t) / max(1, len(done))
        cpu["outputs"] = [per] * len(done)
    finally:
        shutil.rmtree(out, ignore_errors=True)
    stages = {
        s: {"median_ms": round(statistics.median(v) * 1000, 2), "mean_ms": round(statistics.fmean(v) * 1000, 2)}
        for s, v in cpu.items()
        if v
    }
    total = round(sum(x["mean_ms"] for x in stages.values()), 2)
    return {
        "pages": len(done),
        "stages": stages,
        "total_mean_ms": total,
        "png_kib_mean": round(statistics.fmean(sizes) / 1024, 1) if sizes else None,
        "note": "CPU time of the measuring thread per page, pages one at a time; the server's work and the samplers' threads are not counted",
    }
