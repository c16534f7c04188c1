#!/usr/bin/env bash
# Client CPU a page against the stand-in by run length (fixed costs of a run, e.g. the workers' start,
# spread over more pages), this tree, both profiles, rounds interleaved.
set -u
root=$(pwd)
mkdir -p $OUT/len
python3 -m pip install -q --no-index --no-deps --target /tmp/site .gpu/wheels/*.whl > $OUT/pip.log 2>&1 || exit 1
export PYTHONPATH=/tmp/site:$root PYTHONUNBUFFERED=1
inc=$(python3 -c "import sysconfig; print(sysconfig.get_paths()['include'])")
suf=$(python3 -c "import sysconfig; print(sysconfig.get_config_var('EXT_SUFFIX'))")
gcc -O3 -shared -fPIC -I"$inc" ocrserve/_gray.c -o ocrserve/_gray$suf || exit 1
gcc -O3 -shared -fPIC -I"$inc" ocrserve/ingest/_lanczos.c -o ocrserve/ingest/_lanczos$suf || exit 1
for r in 0 1; do
  for m in chandra-1 chandra-2; do
    for n in ${LENGTHS:-192 768 1536}; do
      timeout 200 python3 -m bench.client_cpu_stages --modes pipeline --pages $n --model $m --out $OUT/len --name $m-$n-r$r > $OUT/len/$m-$n-r$r.log 2>&1
      echo "$m $n r$r: $(python3 -c "import json,sys; d=json.load(open('$OUT/len/$m-$n-r$r.json'))['modes']['pipeline']; print(round(d['client_cpu_s_per_page']*1000,1), 'ms/page', d['pages_per_s'], 'pages/s', d['wall_s'], 's')")"
    done
  done
done
cd $OUT && tar czf len.tgz len && rm -rf len
