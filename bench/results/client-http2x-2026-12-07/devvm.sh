#!/usr/bin/env bash
# The dev VM's side of hostsplit.sh: this tree against .gpu/before (ed07456, bench/pipeline_split.py copied
# in, the native code built there), rounds interleaved, from the repository root with the venv active:
#   OUT=bench/results/client-http2x-2026-12-07/devvm bash bench/results/client-http2x-2026-12-07/devvm.sh
set -u
root=$(pwd)
mkdir -p $OUT
for r in 1 2; do
    for m in chandra-2 chandra-1; do
        for t in before after; do
            dir=$root; [ $t = before ] && dir=$root/.gpu/before
            (cd $dir && PYTHONPATH=$dir python -m bench.pipeline_split --model $m --pages 128 \
                --concurrency 128 --delay-s 3 --out $root/$OUT --name paced-$m-$t-r$r > /dev/null)
            (cd $dir && PYTHONPATH=$dir python -m bench.pipeline_split --model $m --pages 96 \
                --concurrency 16 --out $root/$OUT --name instant-$m-$t-r$r > /dev/null)
        done
    done
done
python - <<'PY' | tee $OUT/summary.md
import json, glob, os, statistics
rows = {}
for f in sorted(glob.glob(os.environ["OUT"] + "/*-r[12].json")):
    rows.setdefault(os.path.basename(f)[:-8], []).append(json.load(open(f))["runs"][0])
print("| run | parent ms | workers ms | total ms (rounds) |\n|---|---|---|---|")
for k, v in rows.items():
    med = lambda f: round(statistics.median(x[f] for x in v), 2)
    print(f"| {k} | {med('parent_ms')} | {med('workers_ms')} | {' '.join(str(x['total_ms']) for x in v)} |")
PY
