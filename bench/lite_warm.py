"""A text-layer PDF converted with the lite engine, RapidOCR loaded when its workers start (warm) or on the
first page that needs OCR (lazy, the conversion's default since Settings.lite_warm): wall time of a whole
`ocrserve.convert` call, each in a fresh process, rounds interleaved.

    python -m bench.lite_warm --rounds 3 [PDF]
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def one(pdf: str, warm: bool) -> float:
    import ocrserve

    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as out:
        (r,) = ocrserve.convert([pdf], output_dir=out, engine="lite", engine_options={"warm": warm})
        assert r.ok, r.error
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("pdf", nargs="?", default=str(ROOT / "ocrserve/samples/sample.pdf"))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--one", choices=["warm", "lazy"], help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.one:
        print(json.dumps(one(a.pdf, a.one == "warm")))
        return
    times: dict[str, list[float]] = {"warm": [], "lazy": []}
    for _ in range(a.rounds):
        for kind in ("warm", "lazy"):
            p = subprocess.run(
                [sys.executable, "-m", "bench.lite_warm", a.pdf, "--one", kind],
                capture_output=True,
                text=True,
                check=True,
                cwd=ROOT,
            )
            times[kind].append(round(float(p.stdout.strip().splitlines()[-1]), 3))
    print(
        json.dumps(
            {
                "pdf": a.pdf,
                "python": platform.python_version(),
                "seconds": times,
                "median": {k: statistics.median(v) for k, v in times.items()},
            },
            indent=1,
        )
    )


if __name__ == "__main__":
    main()
