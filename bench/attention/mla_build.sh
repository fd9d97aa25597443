#!/usr/bin/env bash
# Builds the MLA decode bench (bench/attention/mla_bench.cu) against profiler/kernels' MLA kernels.
# Usage: bench/attention/mla_build.sh [output (default mla_bench)]; run: ./mla_bench [HEADS,...]
set -euo pipefail
cd "$(dirname "$0")/../.."
nvcc -std=c++17 -O3 -arch=sm_90 -lineinfo --expt-relaxed-constexpr -DFMT_HEADER_ONLY -I. -o "${1:-mla_bench}" \
  bench/attention/mla_bench.cu profiler/kernels/mla_decode.cu profiler/kernels/mla_cache.cu planner/core/error.cpp
