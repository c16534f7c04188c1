"""Issue 3's client-side measurements on the CPU, against the stand-in server answering at once.

1. A 300-page born-digital PDF: ocrserve's pipeline beside a plain sequential client (render,
   PNG-encode, request, one page after another), same pages, same server, same run.
2. Peak client memory (main process + render workers, RSS summed: an upper bound, forked workers
   share pages) over a 2,000-page PDF.

    python -m bench.client_throughput [--pages 300] [--memory-pages 2000] [--out bench/results]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

from tests.fakes.standin import start_standin

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pages", type=int, default=300)
    ap.add_argument("--memory-pages", type=int, default=2000)
    ap.add_argument("--out", default=str(ROOT / "bench" / "results"))
    a = ap.parse_args()
    server = start_standin()
    try:
        common = [
            sys.executable,
            "-m",
            "ocrserve",
            "bench",
            "--server",
            server.url,
            "--no-ignore-eos",
            "--max-tokens",
            "4096",
            "--stream-probe",
            "0",
            "--out",
            a.out,
        ]
        if a.pages:
            subprocess.run(
                common
                + [
                    "--synthetic",
                    str(a.pages),
                    "--modes",
                    "pipeline,plain",
                    "--plain-batch",
                    "1",
                    "--name",
                    "client-throughput-cpu",
                ],
                cwd=ROOT,
                check=True,
            )
        if a.memory_pages:
            subprocess.run(
                common
                + [
                    "--synthetic",
                    str(a.memory_pages),
                    "--modes",
                    "pipeline",
                    "--seed",
                    "7",
                    "--name",
                    "client-memory-2000p-cpu",
                ],
                cwd=ROOT,
                check=True,
            )
    finally:
        server.stop()


if __name__ == "__main__":
    main()
