"""Start of a conversion (`ocrserve.convert`, openai engine, stand-in server) to its first request: a 1-page
PDF against a 50-page one, both profiles, interleaved rounds. Equal times mean the first page is sent once
it is rendered, not after the rest of the document.

    python bench/results/client-cpu-2026-12-04/first_request.py > bench/results/client-cpu-2026-12-04/first_request.txt
"""

import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
from bench.client_cpu_stages import first_request_s
from ocrserve.profiles import PROFILES
from tests.fakes.standin import start_standin

work = Path(tempfile.mkdtemp())
for model in ("chandra-1", "chandra-2"):
    got: dict[int, list[float]] = {1: [], 50: []}
    with start_standin(root=PROFILES[model].checkpoint) as s:
        first_request_s(s.url, model, 1, work)  # warm: imports, the stand-in's first answer
        for _ in range(5):
            for n in (1, 50):
                got[n].append(first_request_s(s.url, model, n, work)["first_request_s"])
    for n, v in got.items():
        print(f"{model} {n:>2}-page PDF: first request after {statistics.median(v):.3f} s (median of {v})")
