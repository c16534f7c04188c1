#!/usr/bin/env bash
# This session's tree against the session's start (a5091c6, exported to .gpu/before and carried), on the GPU
# host: the client's pipeline CPU a page, both profiles, rounds interleaved (bench.tree_compare).
set -u
root=$(pwd)
python3 -m pip install -q --no-index --no-deps --target /tmp/site .gpu/wheels/*.whl > $OUT/pip.log 2>&1 || { tail $OUT/pip.log; exit 1; }
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
inc=$(python3 -c "import sysconfig; print(sysconfig.get_paths()['include'])")
suf=$(python3 -c "import sysconfig; print(sysconfig.get_config_var('EXT_SUFFIX'))")
for t in "$root" "$root/.gpu/before"; do
    gcc -O3 -shared -fPIC -I"$inc" $t/ocrserve/_gray.c -o $t/ocrserve/_gray$suf || exit 1
    gcc -O3 -shared -fPIC -I"$inc" $t/ocrserve/ingest/_lanczos.c -o $t/ocrserve/ingest/_lanczos$suf || exit 1
done
lscpu > $OUT/lscpu.txt; nproc >> $OUT/lscpu.txt; python3 --version >> $OUT/lscpu.txt
python3 -m pip list --path /tmp/site > $OUT/pip-list-carried.txt 2>/dev/null
python3 -m bench.tree_compare --before .gpu/before --after . --rounds ${ROUNDS:-3} --pages ${PAGES:-192} --out $OUT 2>&1 | tee $OUT/tree-compare.log
