#!/usr/bin/env bash
# On the GPU host (a device run, carry .gpu/wheels): what the client sustains on two cores. bench/pipeline_split.py
# with the client (the parent and the render workers it starts, sized by the CPUs it may use: 2) pinned to CPUs 0,1
# and the stand-in on the other 14, offered far more than two cores can take (256 in flight, each page answered
# 2 s after it came: up to 128 pages/s), 1,024 pages a run; then with 4 render workers; and the base64 encoder alone.
# Everything under $OUT, tarred into $OUT/all.tgz.
set -u
. bench/host_setup.sh
mkdir -p $OUT/r
lscpu > $OUT/r/lscpu.txt; nproc >> $OUT/r/lscpu.txt; python3 --version >> $OUT/r/lscpu.txt
python3 -m pip list --path /tmp/site > $OUT/r/pip-list-carried.txt 2>/dev/null
python3 bench/results/client-b64-2026-12-07/b64_micro.py > $OUT/r/b64-micro.txt 2>&1
for r in 1 2; do
    for m in chandra-2 chandra-1; do
        timeout 200 python3 -m bench.pipeline_split --model $m --pages 1024 --concurrency 256 --delay-s 2 --client-cpus 0,1 \
            --out $OUT/r --name two-cores-$m-r$r > /dev/null 2> $OUT/r/two-cores-$m-r$r.err
        echo "r$r $m done $(date +%T)"
    done
done
timeout 200 python3 -m bench.pipeline_split --model chandra-2 --pages 1024 --concurrency 256 --delay-s 2 --client-cpus 0,1 \
    --render-workers 4 --out $OUT/r --name two-cores-4w-chandra-2-r1 > /dev/null 2> $OUT/r/two-cores-4w-chandra-2-r1.err
python3 - <<'PY' | tee $OUT/r/summary.md
import json, glob, os
print("| run | pages/s | wall s | CPU ms a page (parent + workers) |\n|---|---|---|---|")
for f in sorted(glob.glob(os.environ["OUT"] + "/r/two-cores-*.json")):
    x = json.load(open(f))["runs"][0]
    print(f"| {os.path.basename(f)[:-5]} | {x['pages_per_s']} | {x['wall_s']} | {x['total_ms']} ({x['parent_ms']} + {x['workers_ms']}) |")
PY
cat $OUT/r/b64-micro.txt
cd $OUT && tar czf all.tgz r && rm -rf r
