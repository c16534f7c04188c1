"""Client CPU per page against the stand-in server (instant answers: all that is measured is the client):
the pipeline's total (`ocrserve bench` pipeline mode, render workers included) and the split per stage.

    python -m bench.client_cpu_stages --pages 48 --out bench/results/client-cpu-stages --name after
    python -m bench.client_cpu_stages --pages 48 --legacy-png --name before   # the PNG encoder before issue 19
    python -m bench.client_cpu_stages --model chandra-2 --baseline --name before-28   # the RGB fit before #28

`--model` picks the profile (the stand-in then claims that model's checkpoint; its answers stay Chandra 1's).
`--delay-s 20` makes the stand-in wait that long before each answer (a busy GPU server's latency):
client CPU that grows with the run's length, not with its pages, shows there (`--modes pipeline`).

`--legacy-png` puts back the page-image encoder of before (Pillow, RGB, compress_level 1) in this
process and the render workers it forks, so both runs measure the same code otherwise; `--baseline`
likewise puts back the fit of before issue 28 (every page resized in RGB).

`--pdfium-fill` puts back pypdfium2's own page bitmap, filled white by pdfium (before
ocrserve/ingest/pdf/bitmap.py); `--before python-pixels` (with `--compare`) Pillow's own LANCZOS resize
and numpy's gray test and copy (before ocrserve/ingest/_lanczos.c and ocrserve/_gray.c); `--before dirty-upper`
the native code without its VZEROUPPER at entry; `--before narrow-pipes` the render pool's pipes at 64 KB.

`--compare` runs both profiles, before (`--baseline`, or with `--before pdfium-fill` that code) and after,
interleaved `--rounds` times in one process, and with `--first-request N` also times a conversion of an N-page PDF from its start to its
first request (`ocrserve.convert`, the openai engine); it writes every run and summary.{json,md}.
"""

from __future__ import annotations

import argparse
import io
import json
import shlex
import statistics
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from ocrserve.bench.runner import run_bench, write_report
from ocrserve.bench.sampling import exclude_from_client
from ocrserve.profiles import PROFILES
from tests.fakes.standin import start_standin

ROOT = Path(__file__).resolve().parents[1]
CODE = {
    "after": "this tree",
    "before": "the fit of before issue 28 (every page resized in RGB)",
    "pdfium-fill": "this tree with pypdfium2's own bitmap, filled white by pdfium (before ocrserve/ingest/pdf/bitmap.py)",
    "python-pixels": (
        "this tree with Pillow's own LANCZOS resize and numpy's gray test and copy"
        " (before ocrserve/ingest/_lanczos.c and ocrserve/_gray.c)"
    ),
    "dirty-upper": (
        "this tree with the native code's VZEROUPPER at entry off (ISA-L's deflate leaves the vector registers'"
        " upper halves dirty for the resampler's and the gray test's SSE code after it)"
    ),
    "narrow-pipes": "this tree with the render pool's pipes left at the OS's 64 KB (before ocrserve.ingest.pool.widen_pipes)",
    "legacy-png": "the page-image encoder of before issue 19 (Pillow, RGB, compress_level 1)",
}


def _legacy_png(img) -> bytes:
    buf = io.BytesIO()
    img.save(buf, format="PNG", compress_level=1)
    return buf.getvalue()


def _rgb_fit(a, budget):
    """The fit before issue 28: every page resized in RGB (the encoder then finds a gray page gray)."""
    from PIL import Image

    from ocrserve.ingest.raster import client_fit_size

    size = client_fit_size(a.shape[1], a.shape[0], budget)
    if size != (a.shape[1], a.shape[0]):
        return np.asarray(Image.fromarray(a, "RGB").resize(size, Image.Resampling.LANCZOS))
    return a


@contextmanager
def _code(
    legacy_png: bool = False,
    baseline: bool = False,
    pdfium_fill: bool = False,
    python_pixels: bool = False,
    dirty_upper: bool = False,
    narrow_pipes: bool = False,
):
    """The code measured: this tree's, or with the encoder of before #19 / the fit of before #28 put back (in
    this process and the render workers it forks); restored on exit."""
    from PIL import Image

    from ocrserve import png
    from ocrserve.ingest import pool, raster, resize

    native = resize.use_native, png.use_native
    resize.use_native = png.use_native = not python_pixels
    pipe_bytes = pool.PIPE_BYTES
    pool.PIPE_BYTES = 0 if narrow_pipes else pipe_bytes
    natives = [m for m in (resize._native, png._native) if m is not None]
    for m in natives:
        m.zeroupper(not dirty_upper)
    keys = ("encode_png", "encode_pixels", "fit_pixels", "to_channels", "bitmap_maker")
    saved = {k: getattr(raster, k) for k in keys}
    if legacy_png:
        raster.encode_png = _legacy_png
        raster.encode_pixels = lambda a: _legacy_png(Image.fromarray(a))
    if baseline:
        raster.fit_pixels = _rgb_fit
        raster.to_channels = raster.to_rgb
    if pdfium_fill:
        from pypdfium2 import PdfBitmap

        raster.bitmap_maker = PdfBitmap.new_native
    try:
        yield
    finally:
        for k, v in saved.items():
            setattr(raster, k, v)
        resize.use_native, png.use_native = native
        pool.PIPE_BYTES = pipe_bytes
        for m in natives:
            m.zeroupper(True)


def first_request_s(server: str, model: str, pages: int, work: Path) -> dict[str, float]:
    """Seconds from the start of a conversion of a `pages`-page PDF to its first request, and to its end."""
    import httpx

    import ocrserve
    from ocrserve.bench.synthetic import make_pdf

    pdf = make_pdf(work / f"doc{pages}.pdf", pages, seed=0)  # page 1 is the same page whatever the length
    first: list[float] = []
    send = httpx.AsyncClient.send

    async def spy(self, request, *args, **kwargs):
        if request.method == "POST" and not first:
            first.append(time.perf_counter())
        return await send(self, request, *args, **kwargs)

    httpx.AsyncClient.send = spy  # type: ignore[method-assign]
    try:
        t0 = time.perf_counter()
        (res,) = ocrserve.convert([pdf], server=server, model=model, output_dir=str(work / f"out-{time.time_ns()}"))
        end = time.perf_counter()
    finally:
        httpx.AsyncClient.send = send  # type: ignore[method-assign]
    assert res.status == "ok", res.error
    return {"first_request_s": round(first[0] - t0, 3), "whole_s": round(end - t0, 3), "pages": pages}


def _one(a, model: str, name: str, server: str, work: Path, code: str) -> dict[str, Any]:
    report = run_bench(
        server=server,
        synthetic=a.pages,
        modes=a.modes.split(","),
        model=model,
        concurrency=a.concurrency,
        max_tokens=a.max_tokens,
        stream_probe=0,
        command="python -m bench.client_cpu_stages " + shlex.join(sys.argv[1:]),
    )
    if a.first_request:
        report["first_request"] = first_request_s(server, model, a.first_request, work)
    report["standin_delay_s"] = a.delay_s
    report["code"] = code
    write_report(report, a.out, name)
    return report


def compare(a) -> None:
    """Both profiles, before and after, interleaved rounds; the medians in summary.{json,md}."""
    rows: dict[str, list[dict[str, Any]]] = {}
    with tempfile.TemporaryDirectory(prefix="ccs-") as tmp:
        for r in range(a.rounds):
            for model in ("chandra-1", "chandra-2"):
                with start_standin(delay_s=a.delay_s, root=PROFILES[model].checkpoint) as s:
                    exclude_from_client(s.proc.pid)
                    for variant in ("before", "after"):
                        old = variant == "before"
                        with _code(
                            baseline=old and a.before == "rgb-fit",
                            pdfium_fill=old and a.before == "pdfium-fill",
                            python_pixels=old and a.before == "python-pixels",
                            dirty_upper=old and a.before == "dirty-upper",
                            narrow_pipes=old and a.before == "narrow-pipes",
                        ):
                            what = CODE["before" if a.before == "rgb-fit" else a.before] if old else CODE[variant]
                            rep = _one(a, model, f"{model}-{variant}-r{r}", s.url, Path(tmp), what)
                        st = rep.get("client_cpu_stages") or {}
                        rows.setdefault(f"{model} {variant}", []).append(
                            {
                                "pipeline_ms": 1000 * rep["modes"]["pipeline"]["client_cpu_s_per_page"],
                                **{k: v["mean_ms"] for k, v in (st.get("stages") or {}).items()},
                                "stages_ms": st.get("total_mean_ms"),
                                **(rep.get("first_request") or {}),
                            }
                        )
    med = {
        k: {f: round(statistics.median(x[f] for x in v), 3) for f in v[0] if v[0][f] is not None}
        for k, v in rows.items()
    }
    summary = {"command": "python -m bench.client_cpu_stages " + shlex.join(sys.argv[1:]), "runs": rows, "median": med}
    (a.out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    cols = list(next(iter(med.values())))
    lines = ["| run | " + " | ".join(cols) + " |", "|---" * (len(cols) + 1) + "|"]
    lines += [f"| {k} | " + " | ".join(str(v[c]) for c in cols) + " |" for k, v in med.items()]
    (a.out / "summary.md").write_text(
        "Medians over rounds (ms a page; first request and whole in s):\n\n" + "\n".join(lines) + "\n"
    )
    print("\n".join(lines))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pages", type=int, default=48)
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--max-tokens", type=int, default=1024)
    ap.add_argument("--model", choices=sorted(PROFILES), default="chandra-1")
    ap.add_argument("--legacy-png", action="store_true")
    ap.add_argument("--baseline", action="store_true", help="the fit of before issue 28 (RGB resize)")
    ap.add_argument("--pdfium-fill", action="store_true", help="pypdfium2's own bitmap, filled by pdfium")
    ap.add_argument("--compare", action="store_true", help="both profiles, before and after, interleaved")
    ap.add_argument(
        "--before",
        choices=("rgb-fit", "pdfium-fill", "python-pixels", "dirty-upper", "narrow-pipes"),
        default="rgb-fit",
        help="--compare's before: the code put back",
    )
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument(
        "--first-request", type=int, default=0, help="also time a PDF of this many pages to its first request"
    )
    ap.add_argument("--delay-s", type=float, default=0.0, help="the stand-in's wait before each answer")
    ap.add_argument("--modes", default="pipeline,stages")
    ap.add_argument("--out", type=Path, default=ROOT / "bench/results/client-cpu-stages")
    ap.add_argument("--name", default="client-cpu-stages")
    a = ap.parse_args()
    if a.compare:
        a.out.mkdir(parents=True, exist_ok=True)
        return compare(a)
    with start_standin(delay_s=a.delay_s, root=PROFILES[a.model].checkpoint) as s:
        exclude_from_client(s.proc.pid)  # the stand-in is our child, not the client
        with (
            _code(legacy_png=a.legacy_png, baseline=a.baseline, pdfium_fill=a.pdfium_fill),
            tempfile.TemporaryDirectory() as tmp,
        ):
            code = "before" if a.baseline else "pdfium-fill" if a.pdfium_fill else "after"
            code = "legacy-png" if a.legacy_png else code
            _one(a, a.model, a.name, s.url, Path(tmp), CODE[code])
    print((a.out / f"{a.name}.md").read_text())


if __name__ == "__main__":
    main()
