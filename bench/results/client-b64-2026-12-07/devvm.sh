#!/usr/bin/env bash
# The pipeline's client CPU a page (bench/pipeline_split.py: the parent and the render workers) with the request's
# base64 by the standard library (BEFORE: a source tree without the change, its native code built) against
# pybase64 (this tree), rounds interleaved, GPU-paced (128 in flight, each page answered 3 s after it came).
#   BEFORE=/tmp/rbefore OUT=bench/results/client-b64-2026-12-07/devvm bash bench/results/client-b64-2026-12-07/devvm.sh
set -u
root=$(pwd)
mkdir -p "$OUT"; OUT=$(realpath "$OUT")
for r in 1 2 3; do
    for m in chandra-2 chandra-1; do
        for t in before after; do
            dir=$root; [ $t = before ] && dir=$BEFORE
            (cd "$dir" && PYTHONPATH="$dir${PYTHONPATH:+:$PYTHONPATH}" timeout 200 python -m bench.pipeline_split --model $m \
                --pages 192 --concurrency 128 --delay-s 3 --out "$OUT" --name paced-$m-$t-r$r > /dev/null 2> "$OUT/paced-$m-$t-r$r.err")
            echo "r$r $m $t done $(date +%T)"
        done
    done
done
python3 - "$OUT" <<'PY' | tee "$OUT/summary.md"
import json, glob, os, statistics, sys
rows = {}
for f in sorted(glob.glob(sys.argv[1] + "/*-r[0-9].json")):
    rows.setdefault(os.path.basename(f)[:-8], []).append(json.load(open(f))["runs"][0])
print("| run | parent ms (rounds) | workers ms (rounds) | total ms (rounds) | median total |\n|---|---|---|---|---|")
for k, v in rows.items():
    j = lambda f: " ".join(str(x[f]) for x in v)
    print(f"| {k} | {j('parent_ms')} | {j('workers_ms')} | {j('total_ms')} | {round(statistics.median(x['total_ms'] for x in v), 2)} |")
PY
