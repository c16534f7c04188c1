#!/usr/bin/env bash
# client CPU a page on the GPU host against the stand-in: this tree (.gpu/src) and the session's start (.gpu/old), rounds interleaved
set -u
root=$(pwd)
mkdir -p $OUT/cpu
for r in 0 1; do
  for m in chandra-1 chandra-2; do
    for t in old src; do
      (cd $root/.gpu/$t && timeout 240 python -m bench.client_cpu_stages --pages 192 --modes pipeline --model $m --out $OUT/cpu --name $m-$t-r$r > $OUT/cpu/$m-$t-r$r.log 2>&1)
      echo "$m $t r$r: $(grep -E '^\| pipeline' $OUT/cpu/$m-$t-r$r.md | awk -F'|' '{print $11}')"
    done
  done
done
