"""Client CPU per page against the stand-in server (instant answers: all that is measured is the client):
the pipeline's total (`ocrserve bench` pipeline mode, render workers included) and the split per stage.

    python -m bench.client_cpu_stages --pages 48 --out bench/results/client-cpu-stages --name after
    python -m bench.client_cpu_stages --pages 48 --legacy-png --name before   # the PNG encoder before issue 19

`--delay-s 20` makes the stand-in wait that long before each answer (a busy GPU server's latency):
client CPU that grows with the run's length, not with its pages, shows there (`--modes pipeline`).

`--legacy-png` puts back the page-image encoder of before (Pillow, RGB, compress_level 1) in this
process and the render workers it forks, so both runs measure the same code otherwise.
"""

from __future__ import annotations

import argparse
import io
import shlex
import sys
from pathlib import Path

from ocrserve.bench.runner import run_bench, write_report
from ocrserve.bench.sampling import exclude_from_client
from tests.fakes.standin import start_standin

ROOT = Path(__file__).resolve().parents[1]


def _legacy_png(img) -> bytes:
    buf = io.BytesIO()
    img.save(buf, format="PNG", compress_level=1)
    return buf.getvalue()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pages", type=int, default=48)
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--max-tokens", type=int, default=1024)
    ap.add_argument("--legacy-png", action="store_true")
    ap.add_argument("--delay-s", type=float, default=0.0, help="the stand-in's wait before each answer")
    ap.add_argument("--modes", default="pipeline,stages")
    ap.add_argument("--out", type=Path, default=ROOT / "bench/results/client-cpu-stages")
    ap.add_argument("--name", default="client-cpu-stages")
    a = ap.parse_args()
    if a.legacy_png:
        from PIL import Image

        from ocrserve.ingest import raster

        raster.encode_png = _legacy_png
        raster.encode_pixels = lambda a: _legacy_png(Image.fromarray(a))
    with start_standin(delay_s=a.delay_s) as s:
        exclude_from_client(s.proc.pid)  # the stand-in is our child, not the client
        report = run_bench(
            server=s.url,
            synthetic=a.pages,
            modes=a.modes.split(","),
            concurrency=a.concurrency,
            max_tokens=a.max_tokens,
            stream_probe=0,
            command="python -m bench.client_cpu_stages " + shlex.join(sys.argv[1:]),
        )
    report["standin_delay_s"] = a.delay_s
    report["png_encoder"] = (
        "legacy: Pillow RGB compress_level 1" if a.legacy_png else "ocrserve.ingest.raster.encode_png"
    )
    jp, mp = write_report(report, a.out, a.name)
    print(mp.read_text())


if __name__ == "__main__":
    main()
