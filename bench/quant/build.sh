#!/usr/bin/env bash
# Stand-alone bench of the quantized GEMMs through the executor's own runner
# (profiler/gpu/gemm_quant.hpp and the kernels it calls): see qbench.cu for what it prints.
# Usage: bench/quant/build.sh [output (default qb)]      Run: ./qb OUTDIR
set -euo pipefail
cd "$(dirname "$0")/../.."
# It also runs the issue-15 self-test cases first (profiler/exec/self_test_quant.cpp).
o=$(mktemp -d)
for f in bench/quant/qcheck.cpp profiler/exec/self_test_quant.cpp profiler/exec/self_test_util.cpp \
         profiler/gpu/gemm_quant.cpp profiler/common/attention_support.cpp planner/core/error.cpp planner/core/dtype.cpp; do
  g++ -std=c++20 -O2 -DFMT_HEADER_ONLY=1 -I. -isystem /usr/local/cuda/include -c "$f" -o "$o/$(basename "$f").o"
done
for f in bench/quant/qbench.cu profiler/gpu/gemm.cu profiler/kernels/quant.cu profiler/kernels/w4a16.cu \
         profiler/kernels/elementwise.cu profiler/kernels/decode_attention.cu profiler/kernels/prefill_attention.cu; do
  nvcc -std=c++17 -O3 -arch=sm_90 -lineinfo --expt-relaxed-constexpr -DFMT_HEADER_ONLY=1 -I. -c "$f" -o "$o/$(basename "$f").o"
done
nvcc -arch=sm_90 -o "${1:-qb}" "$o"/*.o -lcublasLt -lcublas
rm -rf "$o"
