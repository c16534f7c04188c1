#!/usr/bin/env bash
# On the GPU host: the pipeline's client CPU a page split into the parent and the render workers
# (bench/pipeline_split.py), this tree (the openai engine on httpx2) against .gpu/before (ed07456, httpx;
# bench/pipeline_split.py copied in), rounds interleaved; against the stand-in instant (16 in flight) and
# GPU-paced (128 in flight, each answered 3 s after it came: ~40 pages/s, what 8 GPUs take); then the
# stages with the figure crops (this tree). Everything under $OUT, tarred into $OUT/all.tgz.
set -u
root=$(pwd)
. bench/host_setup.sh "$root/.gpu/before"
mkdir -p $OUT/r
lscpu > $OUT/r/lscpu.txt; nproc >> $OUT/r/lscpu.txt; python3 --version >> $OUT/r/lscpu.txt
python3 -m pip list --path /tmp/site > $OUT/r/pip-list-carried.txt 2>/dev/null
for r in 1 2; do
    for m in chandra-2 chandra-1; do
        for t in before after; do
            dir=$root; [ $t = before ] && dir=$root/.gpu/before
            (cd $dir && PYTHONPATH=$dir:/tmp/site timeout 150 python3 -m bench.pipeline_split --model $m --pages 256 \
                --concurrency 128 --delay-s 3 --out $OUT/r --name paced-$m-$t-r$r > /dev/null 2> $OUT/r/paced-$m-$t-r$r.err)
            (cd $dir && PYTHONPATH=$dir:/tmp/site timeout 150 python3 -m bench.pipeline_split --model $m --pages 192 \
                --concurrency 16 --out $OUT/r --name instant-$m-$t-r$r > /dev/null 2> $OUT/r/instant-$m-$t-r$r.err)
            echo "r$r $m $t done $(date +%T)"
        done
    done
done
for m in chandra-2 chandra-1; do
    timeout 200 python3 -m bench.client_cpu_stages --model $m --pages 48 --modes stages --out $OUT/r --name stages-$m > /dev/null 2> $OUT/r/stages-$m.err
done
python3 - <<'PY' | tee $OUT/r/summary.md
import json, glob, os, statistics
rows = {}
for f in sorted(glob.glob(os.environ["OUT"] + "/r/*-r[12].json")):
    name = os.path.basename(f)[:-8]
    run = json.load(open(f))["runs"][0]
    rows.setdefault(name, []).append(run)
print("| run | parent ms | workers ms | total ms (rounds) |\n|---|---|---|---|")
for k, v in rows.items():
    med = lambda f: round(statistics.median(x[f] for x in v), 2)
    print(f"| {k} | {med('parent_ms')} | {med('workers_ms')} | {' '.join(str(x['total_ms']) for x in v)} |")
PY
cd $OUT && tar czf all.tgz r && rm -rf r
