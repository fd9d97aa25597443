#!/usr/bin/env bash
# Builds the long-context attention bench (chunk_bench.cu, issue 18) against this tree's kernels and
# its cuDNN attention path (loaded at run time with dlopen: nothing to link). Objects are kept in
# OUTPUT.obj/ and rebuilt only when their source is newer.
# Usage: bench/attention/chunk_build.sh [output (default cb)]
set -euo pipefail
cd "$(dirname "$0")/../.."
out=${1:-cb}
obj=$out.obj
mkdir -p "$obj"
objs=()
for src in bench/attention/chunk_bench.cu profiler/kernels/decode_attention.cu profiler/kernels/prefill_attention.cu \
           profiler/kernels/prefill_dispatch.cpp profiler/gpu/cudnn_attention.cpp profiler/gpu/cudnn_attention_prep.cu \
           profiler/common/attention_support.cpp planner/core/error.cpp; do
  o=$obj/$(echo "$src" | tr / _).o
  if [ ! -f "$o" ] || [ "$src" -nt "$o" ] || [ profiler/kernels/attention.hpp -nt "$o" ]; then
    nvcc -std=c++17 -O3 -arch=sm_90 -lineinfo --expt-relaxed-constexpr -DFMT_HEADER_ONLY -I. -c -o "$o" "$src"
  fi
  objs+=("$o")
done
nvcc -arch=sm_90 -o "$out" "${objs[@]}" -ldl
