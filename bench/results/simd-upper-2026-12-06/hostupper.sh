#!/usr/bin/env bash
# The native code after ISA-L's deflate with and without its VZEROUPPER at entry, on the GPU host: the steps
# alone (bench.simd_upper), then the client's whole pipeline, before (`--before dirty-upper`) and after,
# rounds interleaved, both profiles (bench.client_cpu_stages --compare).
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
gcc --version | head -1 >> $OUT/native.txt
lscpu > $OUT/lscpu.txt; nproc >> $OUT/lscpu.txt
PYTHONPATH=/tmp/site python3 -m pip list --path /tmp/site > $OUT/pip-list-carried.txt 2>/dev/null
python3 -m bench.simd_upper --pages 16 --rounds ${ROUNDS:-3} --out $OUT 2>&1 | tee $OUT/simd-upper.log
timeout ${BENCH_S:-440} python3 -m bench.client_cpu_stages --compare --before dirty-upper --rounds ${ROUNDS:-3} --pages ${PAGES:-192} \
    --modes pipeline,stages --out $OUT/cpu 2>&1 | tee $OUT/cpu.log | grep -E "^\|"
echo "rc ${PIPESTATUS[0]}"
# the render pool's transport alone, pipes at 64 KB against widened (bench/results/pool-pipes-2026-12-06/)
mkdir -p $OUT/pipes
python3 -m bench.pool_pipes --pages 192 --rounds 7 --out $OUT/pipes 2>&1 | tee $OUT/pipes/pool-pipes.log
