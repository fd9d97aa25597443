#!/usr/bin/env bash
# Stand-alone bench of the attention kernels through their public API (profiler/kernels/attention.hpp):
# event-timed median of 30 launches per shape, plus a check of a few large shapes against a naive
# fp32 GPU reference ("err=" relative L2 error). Link it against any version of the two kernel
# files to compare versions on one lease, e.g. the sources of an older commit:
#   git show <commit>:profiler/kernels/decode_attention.cu > /tmp/old/decode_attention.cu  (same for prefill)
#   bench/attention/build.sh /tmp/old out/kb_old
# Usage: build.sh [kernel-source-dir (default profiler/kernels)] [output (default kb)]; run: ./kb TAG
set -euo pipefail
cd "$(dirname "$0")/../.."
src=${1:-profiler/kernels}
nvcc -std=c++17 -O3 -arch=sm_90 -lineinfo --expt-relaxed-constexpr -I. -o "${2:-kb}" \
  bench/attention/kbench.cu "$src/decode_attention.cu" "$src/prefill_attention.cu"
