#!/usr/bin/env bash
# Why --compare reads more client CPU than a run of its own: the same pages, standalone with and without
# the stages mode in the process, and --compare with the pipeline mode only.
set -u
root=$(pwd)
mkdir -p $OUT/modes
python3 -m pip install -q --no-index --no-deps --target /tmp/site .gpu/wheels/*.whl > $OUT/pip.log 2>&1 || exit 1
export PYTHONPATH=/tmp/site:$root PYTHONUNBUFFERED=1
inc=$(python3 -c "import sysconfig; print(sysconfig.get_paths()['include'])")
suf=$(python3 -c "import sysconfig; print(sysconfig.get_config_var('EXT_SUFFIX'))")
gcc -O3 -shared -fPIC -I"$inc" ocrserve/_gray.c -o ocrserve/_gray$suf || exit 1
gcc -O3 -shared -fPIC -I"$inc" ocrserve/ingest/_lanczos.c -o ocrserve/ingest/_lanczos$suf || exit 1
ms() { python3 -c "import json; d=json.load(open('$1'))['modes']['pipeline']; print(round(d['client_cpu_s_per_page']*1000,1), 'ms/page', d['pages_per_s'], 'pages/s')"; }
for r in 0 1; do
  for m in chandra-1 chandra-2; do
    for modes in pipeline pipeline,stages; do
      n=$m-${modes/,/-}-r$r
      timeout 120 python3 -m bench.client_cpu_stages --modes $modes --pages 192 --model $m --out $OUT/modes --name $n > $OUT/modes/$n.log 2>&1
      echo "$n: $(ms $OUT/modes/$n.json)"
    done
  done
done
timeout 200 python3 -m bench.client_cpu_stages --compare --before python-pixels --rounds 2 --pages 192 --modes pipeline \
    --out $OUT/modes/compare-pipeline-only 2>&1 | grep -E "^\|"
cd $OUT && tar czf modes.tgz modes && rm -rf modes
