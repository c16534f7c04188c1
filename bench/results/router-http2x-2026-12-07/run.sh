#!/usr/bin/env bash
# The router's CPU a request on httpx (BEFORE: a source tree of the commit before the change) against httpx2
# (this tree), rounds interleaved: paced (128 in flight, each answer 2 s after it came, 256 requests of a
# ~1 MB page PNG) and instant (16 in flight, 200 requests; and the 64 streams).
#   BEFORE=/tmp/rbefore OUT=bench/results/router-http2x-2026-12-07/devvm bash bench/results/router-http2x-2026-12-07/run.sh
set -eu
mkdir -p "$OUT"
for r in 1 2; do
    for t in before after; do
        tree=(); [ $t = before ] && tree=(--tree "$BEFORE")
        timeout 300 python -m bench.router_overhead --requests 256 --concurrency 128 --delay-s 2 --streams 0 \
            "${tree[@]}" --out "$OUT/paced-$t-r$r" > /dev/null 2> "$OUT/paced-$t-r$r.err"
        timeout 300 python -m bench.router_overhead "${tree[@]}" --out "$OUT/instant-$t-r$r" > /dev/null 2> "$OUT/instant-$t-r$r.err"
        echo "r$r $t done $(date +%T)"
    done
done
python3 - "$OUT" <<'PY' | tee "$OUT/summary.md"
import json, glob, os, sys
print("| run | router CPU ms a request | p50 direct ms | p50 routed ms | router CPU us a stream event |\n|---|---|---|---|---|")
for f in sorted(glob.glob(sys.argv[1] + "/*/router-overhead.json")):
    d = json.load(open(f))
    print(f"| {os.path.basename(os.path.dirname(f))} | {d['router_cpu_ms_per_request']} | {d['latency_p50_direct_ms']} | "
          f"{d['latency_p50_router_ms']} | {d['router_cpu_us_per_event'] or '-'} |")
PY
