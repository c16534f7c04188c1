"""Client CPU a page of two source trees side by side: `bench.client_cpu_stages` (pipeline mode, the stand-in
server) run in each tree by turns, `--rounds` times per profile, in separate processes so that each tree
imports its own code (its native extensions built in place: `pip install -e .` or gcc, as
bench/results/simd-upper-2026-12-06/hostupper.sh does). Medians per tree and profile, every run's report kept.

    git worktree add /tmp/before <commit>   # then build its extensions
    python -m bench.tree_compare --before /tmp/before --after . --rounds 3 --pages 192 \\
        --out bench/results/<name>/devvm
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import statistics
import subprocess
import sys
from pathlib import Path


def _commit(tree: Path) -> str:
    """The tree's commit, or "unknown" for a tree that is no repository's root (an exported copy inside another
    repository would report the outer one's)."""
    top = subprocess.run(["git", "-C", str(tree), "rev-parse", "--show-toplevel"], capture_output=True, text=True)
    if Path(top.stdout.strip() or "/nonexistent").resolve() != tree.resolve():
        return "unknown"
    out = subprocess.run(["git", "-C", str(tree), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    dirty = subprocess.run(
        ["git", "-C", str(tree), "status", "--porcelain", "--untracked-files=no"], capture_output=True, text=True
    )
    return out.stdout.strip() + ("+changes" if dirty.stdout.strip() else "")


def _run(tree: Path, model: str, pages: int, out: Path, name: str) -> float:
    cmd = [sys.executable, "-m", "bench.client_cpu_stages", "--model", model, "--pages", str(pages)]
    cmd += ["--modes", "pipeline", "--out", str(out), "--name", name]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(x for x in (str(tree), os.environ.get("PYTHONPATH", "")) if x)}
    subprocess.run(cmd, cwd=tree, env=env, check=True, capture_output=True, text=True)
    report = json.loads((out / f"{name}.json").read_text())
    return 1000 * report["modes"]["pipeline"]["client_cpu_s_per_page"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", type=Path, required=True)
    ap.add_argument("--after", type=Path, default=Path("."))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--pages", type=int, default=192)
    ap.add_argument("--models", default="chandra-2,chandra-1")
    ap.add_argument("--out", type=Path, required=True)
    a = ap.parse_args()
    a.out.mkdir(parents=True, exist_ok=True)
    trees = {"before": a.before.resolve(), "after": a.after.resolve()}
    rows: dict[str, list[float]] = {}
    for r in range(1, a.rounds + 1):
        for model in a.models.split(","):
            for label, tree in trees.items():
                ms = _run(tree, model, a.pages, a.out, f"{model}-{label}-r{r}")
                rows.setdefault(f"{model} {label}", []).append(round(ms, 2))
                print(f"round {r} {model} {label}: {ms:.2f} ms/page", flush=True)
    summary = {
        "command": "python -m bench.tree_compare " + shlex.join(sys.argv[1:]),
        "machine": {"platform": platform.platform(), "cpu_count": os.cpu_count(), "python": platform.python_version()},
        "trees": {k: {"path": str(v), "commit": _commit(v)} for k, v in trees.items()},
        "pages": a.pages,
        "ms_per_page": rows,
        "median": {k: statistics.median(v) for k, v in rows.items()},
    }
    (a.out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    lines = [
        "| profile | before ms/page (rounds) | after ms/page (rounds) | median before → after |",
        "|---|---|---|---|",
    ]
    for model in a.models.split(","):
        b, f = rows[f"{model} before"], rows[f"{model} after"]
        mb, mf = statistics.median(b), statistics.median(f)
        lines.append(
            f"| {model} | {' '.join(map(str, b))} | {' '.join(map(str, f))} | {mb:.1f} → {mf:.1f} ({100 * (mf / mb - 1):+.0f} %) |"
        )
    (a.out / "summary.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
