#!/usr/bin/env bash
# Stand-alone bench of the quantized GEMMs through the executor's own runner
# (profiler/gpu/gemm_quant.hpp and the kernels it calls): see qbench.cu for what it prints.
# Usage: bench/quant/build.sh [output (default qb)]      Run: ./qb OUTDIR
# QB_OBJ=DIR keeps the objects there and recompiles only sources newer than their object (or than
# a header of the quant kernels / runner they may include); default a temporary directory.
set -euo pipefail
cd "$(dirname "$0")/../.."
# It also runs the issue-15 self-test cases first (profiler/exec/self_test_quant.cpp).
if [ -n "${QB_OBJ:-}" ]; then o=$QB_OBJ; mkdir -p "$o"; keep=1; else o=$(mktemp -d); keep=0; fi
headers="profiler/kernels/w4a16.hpp profiler/common/w4_layout.hpp profiler/gpu/gemm_quant.hpp profiler/kernels/quant.hpp profiler/exec/self_test_util.hpp"
stale() {  # $1 source, $2 object
  [ ! -e "$2" ] || [ "$1" -nt "$2" ] && return 0
  for h in $headers; do [ "$h" -nt "$2" ] && return 0; done
  return 1
}
for f in bench/quant/qcheck.cpp profiler/exec/self_test_quant.cpp profiler/exec/self_test_util.cpp \
         profiler/gpu/gemm_quant.cpp profiler/common/attention_support.cpp planner/core/error.cpp planner/core/dtype.cpp; do
  stale "$f" "$o/$(basename "$f").o" || continue
  g++ -std=c++20 -O2 -DFMT_HEADER_ONLY=1 -I. -isystem /usr/local/cuda/include -c "$f" -o "$o/$(basename "$f").o"
done
for f in bench/quant/qbench.cu profiler/gpu/gemm.cu profiler/kernels/dense_gemv.cu profiler/kernels/quant.cu profiler/kernels/w4a16.cu \
         profiler/kernels/elementwise.cu profiler/kernels/decode_attention.cu profiler/kernels/prefill_attention.cu; do
  stale "$f" "$o/$(basename "$f").o" || continue
  nvcc -std=c++17 -O3 -arch=sm_90 -lineinfo --expt-relaxed-constexpr -DFMT_HEADER_ONLY=1 -I. -c "$f" -o "$o/$(basename "$f").o"
done
nvcc -arch=sm_90 -o "${1:-qb}" "$o"/*.o -lcublasLt -lcublas
[ "$keep" = 1 ] || rm -rf "$o"
