"""Serving sweep on the GPU machine: `ocrserve serve` with each configuration of a spec, measured
with the same distinct standard pages at a fixed output length (ocrserve/bench/sweep.py says how).

    # staged with: bash ../shared/gpu/prepare.sh pypdfium2 selectolax pydantic-settings isal reportlab
    # (reportlab: the bench modes' synthetic pages are born-digital only with it; without, scanned images)
    source /tmp/gpu/env.sh
    python bench/sweep_gpu.py --spec bench/sweeps/h200-chandra1.json --model $CHANDRA1_SHAPE --out $OUT
    python bench/sweep_gpu.py --spec ... --dry-run --gpu-memory-gib 140   # plan only (any machine)
    python bench/sweep_gpu.py --scaling 4 --model $CHANDRA1_SHAPE --out $OUT  # dp 1, 2, 4 and epd on 4 GPUs

Writes <out>/<name>.json (everything, with each server's log tails) and <out>/<name>.md (the table
and the exact commands).
"""

from __future__ import annotations

import argparse
import logging
import os
import shlex
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # `python bench/sweep_gpu.py` puts bench/ on the path, not the repository root
    sys.path.insert(0, str(ROOT))

from ocrserve.bench.sweep import Sweep, SweepConfig, SweepSpec, load_spec, scaling_configs, table_rows  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--spec", type=Path, help="sweep spec (JSON); with --scaling, its first config is the base")
    ap.add_argument("--scaling", type=int, help="compare dp replicas 1..N and the encoder/decoder split on N GPUs")
    ap.add_argument("--only", help="comma-separated config names to run (in the spec's order)")
    ap.add_argument("--model", default=os.environ.get("CHANDRA1_SHAPE"), help="model folder (default $CHANDRA1_SHAPE)")
    ap.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "bench-out")))
    ap.add_argument("--name", default="sweep")
    ap.add_argument("--work", type=Path, help="logs and assembled model folders (default: a temp folder)")
    ap.add_argument("--overlap", type=int, default=1, help="servers alive at once (next one starts while one is measured)")
    ap.add_argument("--pages", type=int, help="override the spec's page count")
    ap.add_argument("--max-tokens", type=int, help="override the spec's output length")
    ap.add_argument("--port", type=int, default=8100)
    ap.add_argument("--gpu-memory-gib", type=float, help="plan for this much GPU memory (no nvidia-smi needed)")
    ap.add_argument("--vllm-bin", help="vllm executable for ocrserve serve (tests: a stand-in)")
    ap.add_argument("--startup-timeout", type=float, default=600)
    ap.add_argument("--deadline-s", type=float, help="start no configuration later than this many seconds minus --config-budget-s")
    ap.add_argument("--config-budget-s", type=float, default=150, help="seconds one configuration is expected to take")
    ap.add_argument("--dry-run", action="store_true", help="plan every configuration, print the commands, start nothing")
    a = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)
    if a.spec:
        spec = load_spec(a.spec)
    elif a.scaling:
        spec = SweepSpec(configs=[SweepConfig(name="base", profile="chandra-1")])  # the model: $CHANDRA1_SHAPE
    else:
        ap.error("give --spec or --scaling")
    if a.scaling:
        spec = spec.model_copy(update={"configs": scaling_configs(a.scaling, spec.configs[0])})
    if a.only:
        wanted = [n.strip() for n in a.only.split(",") if n.strip()]
        unknown = [n for n in wanted if n not in {c.name for c in spec.configs}]
        if unknown:
            ap.error(f"--only names configs the spec lacks: {unknown}")
        spec = spec.model_copy(update={"configs": [c for c in spec.configs if c.name in wanted]})
    upd = {k: v for k, v in (("pages", a.pages), ("max_tokens", a.max_tokens)) if v}
    spec = spec.model_copy(update=upd)
    work = a.work or Path(tempfile.mkdtemp(prefix="ocrserve-sweep-"))
    work.mkdir(parents=True, exist_ok=True)
    sweep = Sweep(spec, a.out, model=a.model, work=work, port=a.port, overlap=a.overlap, gpu_memory_gib=a.gpu_memory_gib,
                  vllm_bin=a.vllm_bin, startup_timeout=a.startup_timeout, deadline_s=a.deadline_s,
                  config_budget_s=a.config_budget_s, name=a.name,
                  command="python bench/sweep_gpu.py " + shlex.join(argv if argv is not None else sys.argv[1:]))
    report = sweep.dry_run() if a.dry_run else sweep.run()
    for row in table_rows(report):
        print({k: v for k, v in row.items() if v not in (None, "")}, flush=True)
    if a.dry_run:
        for name, r in report["results"].items():
            for c in r["plan"].get("commands") or []:
                print(f"[{name}] {c}")
    print(f"written: {a.out / (a.name + '.json')} {a.out / (a.name + '.md')}")
    return 0 if all(r.get("ok") or r.get("dry_run") for r in report["results"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
