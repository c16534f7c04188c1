#!/usr/bin/env bash
# On the GPU host (a device run, carry .gpu/wheels .gpu/before .gpu/before2), everything under $OUT, tarred into
# $OUT/all.tgz:
# 1. the pipeline's client CPU a page (bench/pipeline_split.py), GPU-paced (128 in flight, 3 s), this tree
#    (pybase64) against .gpu/before2 (the commit before it: httpx2, the standard library's base64), rounds
#    interleaved, both models;
# 2. the router's CPU a request paced (bench/router_overhead.py, 128 in flight, 2 s): this tree (httpx2) against
#    .gpu/before (ed07456: the router on httpx);
# 3. the stages of this tree, both models (a measure of the lease's cores too: these hosts differ by up to 1.7x).
set -u
root=$(pwd)
. bench/host_setup.sh "$root/.gpu/before2"
mkdir -p $OUT/r
lscpu > $OUT/r/lscpu.txt; nproc >> $OUT/r/lscpu.txt; python3 --version >> $OUT/r/lscpu.txt
python3 -m pip list --path /tmp/site > $OUT/r/pip-list-carried.txt 2>/dev/null
for r in 1 2; do
    for m in chandra-2 chandra-1; do
        for t in before after; do
            dir=$root; [ $t = before ] && dir=$root/.gpu/before2
            (cd $dir && PYTHONPATH=$dir:/tmp/site timeout 150 python3 -m bench.pipeline_split --model $m --pages 256 \
                --concurrency 128 --delay-s 3 --out $OUT/r --name paced-$m-$t-r$r > /dev/null 2> $OUT/r/paced-$m-$t-r$r.err)
            echo "r$r $m $t done $(date +%T)"
        done
    done
done
for t in before after; do
    tree=(); [ $t = before ] && tree=(--tree "$root/.gpu/before")
    timeout 150 python3 -m bench.router_overhead --requests 256 --concurrency 128 --delay-s 2 --streams 0 "${tree[@]}" \
        --out $OUT/r/router-paced-$t > /dev/null 2> $OUT/r/router-paced-$t.err
    echo "router $t done $(date +%T)"
done
for m in chandra-2 chandra-1; do
    timeout 200 python3 -m bench.client_cpu_stages --model $m --pages 48 --modes stages --out $OUT/r --name stages-$m > /dev/null 2> $OUT/r/stages-$m.err
done
python3 - <<'PY' | tee $OUT/r/summary.md
import json, glob, os, statistics
rows = {}
for f in sorted(glob.glob(os.environ["OUT"] + "/r/*-r[12].json")):
    rows.setdefault(os.path.basename(f)[:-8], []).append(json.load(open(f))["runs"][0])
print("| run | parent ms (rounds) | workers ms (rounds) | total ms (rounds) |\n|---|---|---|---|")
for k, v in rows.items():
    j = lambda f: " ".join(str(x[f]) for x in v)
    print(f"| {k} | {j('parent_ms')} | {j('workers_ms')} | {j('total_ms')} |")
for f in sorted(glob.glob(os.environ["OUT"] + "/r/router-paced-*/router-overhead.json")):
    d = json.load(open(f))
    print(f"router {f.split('/')[-2]}: {d['router_cpu_ms_per_request']} ms a request, p50 {d['latency_p50_router_ms']} ms routed, {d['latency_p50_direct_ms']} direct")
PY
cd $OUT && tar czf all.tgz r && rm -rf r
