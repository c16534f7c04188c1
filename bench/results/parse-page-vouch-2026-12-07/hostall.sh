#!/usr/bin/env bash
# One lease, two comparisons on the GPU host: this session's tree against its start (hosttrees.sh, into
# $OUT/trees), then the native code's VZEROUPPER and the pool's pipes (simd-upper-2026-12-06/hostupper.sh,
# into $OUT/upper), its pipeline compare capped at BENCH_S seconds.
set -u
root=$(pwd)
mkdir -p $OUT/trees $OUT/upper
OUT=$OUT/trees ROUNDS=${ROUNDS:-3} PAGES=${PAGES:-192} bash bench/results/parse-page-vouch-2026-12-07/hosttrees.sh
OUT=$OUT/upper BENCH_S=${BENCH_S:-240} ROUNDS=${ROUNDS:-3} bash bench/results/simd-upper-2026-12-06/hostupper.sh
