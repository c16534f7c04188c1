"""CPU ms a page of `parse_output` (the model's answer -> blocks, their HTML, text and Markdown) on the
stand-in server's answers: Chandra-layout pages of 1,024 tokens (4 KB, ~24 blocks: headings, text, a
table, math, a checkbox, a figure), one thread, after a warm-up. The answer's outputs are written with
--dump, to check that two trees parse the same. `--thrash MB` touches that many megabytes between two
parses (as a render worker's page does: render, fit and deflate go through the caches first) and times
each parse alone on this thread's clock.

    python -m bench.parse_cpu --pages 50 --model chandra-2
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from pathlib import Path

import numpy as np

from ocrserve.parse import parse_output
from ocrserve.profiles import load_profile
from tests.fakes.standin_answers import make_answer


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pages", type=int, default=50)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--model", default="chandra-2")
    ap.add_argument("--dump", type=Path, help="write each page's parse as JSON lines here")
    ap.add_argument("--thrash", type=int, default=0, help="MB touched between two parses (cold caches)")
    a = ap.parse_args()
    prof = load_profile(a.model)
    raws = [
        make_answer("ok", hashlib.sha256(str(i).encode()).hexdigest(), 2240, 1596, 1024, True)[0]
        for i in range(a.pages)
    ]
    pages = [parse_output(r, prof, (612, 792), index=0, unit="pt", truncated=True) for r in raws]  # warm
    times = []
    junk = np.zeros(a.thrash << 20, np.uint8) if a.thrash else None
    for _ in range(a.rounds):
        spent = 0.0
        for r in raws:
            if junk is not None:
                junk += 1
            t = time.thread_time()
            parse_output(r, prof, (612, 792), index=0, unit="pt", truncated=True)
            spent += time.thread_time() - t
        times.append(1000 * spent / len(raws))
    print(json.dumps({"command": "python -m bench.parse_cpu " + " ".join(sys.argv[1:]), "ms_per_page": times}))
    if a.dump:
        a.dump.write_text("\n".join(p.model_dump_json() for p in pages) + "\n")


if __name__ == "__main__":
    main()
