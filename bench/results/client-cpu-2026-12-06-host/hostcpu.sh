#!/usr/bin/env bash
# Client CPU a page on the GPU host against the stand-in server: ocrserve's native pixel code (LANCZOS
# resampler, gray test) against Pillow's resize and numpy's test, rounds interleaved, both profiles.
set -u
root=$(pwd)
mkdir -p $OUT/cpu
python3 -m pip install -q --no-index --no-deps --target /tmp/site .gpu/wheels/*.whl > $OUT/pip.log 2>&1 || { tail $OUT/pip.log; exit 1; }
export PYTHONPATH=/tmp/site:$root PYTHONUNBUFFERED=1
inc=$(python3 -c "import sysconfig; print(sysconfig.get_paths()['include'])")
suf=$(python3 -c "import sysconfig; print(sysconfig.get_config_var('EXT_SUFFIX'))")
gcc -O3 -shared -fPIC -I"$inc" ocrserve/_gray.c -o ocrserve/_gray$suf || exit 1
gcc -O3 -shared -fPIC -I"$inc" ocrserve/ingest/_lanczos.c -o ocrserve/ingest/_lanczos$suf || exit 1
python3 -c "
from ocrserve.ingest import resize; from ocrserve import png; import PIL, sys
print('python', sys.version.split()[0], 'Pillow', PIL.__version__, 'native rule', resize.native_rule(), 'gray', png._native is not None)
" | tee $OUT/native.txt
lscpu > $OUT/lscpu.txt; nproc >> $OUT/lscpu.txt; python3 -m pip list > $OUT/pip-list.txt 2>/dev/null; PYTHONPATH=/tmp/site python3 -m pip list --path /tmp/site > $OUT/pip-list-carried.txt 2>/dev/null
git log -1 --format=%H > $OUT/commit.txt 2>/dev/null
timeout ${BENCH_S:-500} python3 -m bench.client_cpu_stages --compare --before python-pixels --rounds ${ROUNDS:-2} --pages ${PAGES:-192} \
    --modes pipeline,stages --out $OUT/cpu 2>&1 | tee $OUT/cpu.log | grep -E "^\|" 
echo "rc ${PIPESTATUS[0]}"
