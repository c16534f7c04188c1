#!/usr/bin/env bash
# The third device run of the lease (workers-8/): 8 render workers (what the pool took on 2 allowed cores before it
# was sized by the process's affinity: the machine's 16 CPUs, capped at 8) against 2 (now the default there).
. bench/host_setup.sh; mkdir -p $OUT/r; for r in 1 2; do for w in 8 2; do timeout 100 python3 -m bench.pipeline_split --model chandra-2 --pages 1024 --concurrency 256 --delay-s 2 --client-cpus 0,1 --render-workers $w --out $OUT/r --name w$w-chandra-2-r$r > /dev/null 2> $OUT/r/w$w-r$r.err; python3 -c "import json;x=json.load(open('$OUT/r/w$w-chandra-2-r$r.json'))['runs'][0];print('w$w r$r',x['pages_per_s'],x['total_ms'],x['parent_ms'],x['workers_ms'])"; done; done; cd $OUT && tar czf all.tgz r && rm -rf r
