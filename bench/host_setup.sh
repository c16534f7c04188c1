#!/usr/bin/env bash
# Sourced by a GPU-host script from the repository root: the carried wheels (.gpu/wheels, Python 3.12) into
# /tmp/site on PYTHONPATH, and the native code built in this tree and in each tree named after it.
#   . bench/host_setup.sh [TREE ...]
python3 -m pip install -q --no-index --no-deps --target /tmp/site .gpu/wheels/*.whl > $OUT/pip.log 2>&1 || { tail $OUT/pip.log; exit 1; }
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
inc=$(python3 -c "import sysconfig; print(sysconfig.get_paths()['include'])")
suf=$(python3 -c "import sysconfig; print(sysconfig.get_config_var('EXT_SUFFIX'))")
for t in "$(pwd)" "$@"; do
    gcc -O3 -shared -fPIC -I"$inc" $t/ocrserve/_gray.c -o $t/ocrserve/_gray$suf || exit 1
    gcc -O3 -shared -fPIC -I"$inc" $t/ocrserve/ingest/_lanczos.c -o $t/ocrserve/ingest/_lanczos$suf || exit 1
done
