#!/usr/bin/env bash
# Stand-alone bench of the attention kernels through their public API (profiler/kernels/attention.hpp):
# event-timed median of 30 launches per shape, plus a check of a few large shapes against a naive
# fp32 GPU reference ("err=" relative L2 error). Link it against any version of the two kernel
# files to compare versions on one lease, e.g. the sources of an older commit:
#   git show <commit>:profiler/kernels/decode_attention.cu > /tmp/old/decode_attention.cu  (same for prefill)
#   bench/attention/build.sh /tmp/old out/kb_old
# Usage: build.sh [kernel-source-dir (default profiler/kernels)] [output (default kb)]
# Run: ./kb TAG [HEADS:KV:DIM,...]   (default shapes: 32:8:128, 64:8:128, 32:8:64 prefill, 32:4:128 decode)
# e.g. a general kernel against a specialised one, same binary and lease:
#   ./kb g7 28:4:128,32:4:128    (Qwen2.5-7B's 7 query heads per kv head vs 8)
#   ./kb d96 32:32:96,32:32:128  (Phi-3-mini's head_dim 96 vs 128)
#   ./kb d256 32:4:256,64:8:128,32:2:256,64:4:128,32:4:192
#        (the 256 dim tile against the 128 one at equal bytes: G 8 and G 16 (two blocks of 8), then
#        192 in its general form; the TB/s column compares them. Prefill at 256 runs on cuDNN only,
#        which the bench does not link: those prefill rows are skipped)
#   ./kb table [bf16|fp8|all]   (default all)
#        (issue 23 item 4's table: decode at head_dim 256 and 192 against the 128 tile at equal KV bytes,
#        G 4/8/16, batch 1/4/8/32/64, context 1k-32k, bf16 and FP8 KV; ratio = wide time / 128 time,
#        rows over 1.10 marked; needs ~8.5 GiB of device memory)
set -euo pipefail
cd "$(dirname "$0")/../.."
src=${1:-profiler/kernels}
# Kernels from before attention_support.cpp defined the support predicate themselves.
extra=()
grep -q "bool attention_head_dim_supported" "$src/decode_attention.cu" || extra=(profiler/common/attention_support.cpp)
# Kernels that dispatch prefill to cuDNN (prefill_dispatch.cpp, not linked here): the bench stubs it out.
defs=()
grep -q "prefill_attention_cudnn" "$src/prefill_attention.cu" && defs+=(-DKBENCH_NO_CUDNN)
grep -q "prefill_attention_path" "$src/prefill_attention.cu" && defs+=(-DKBENCH_HAS_PATH)
nvcc -std=c++17 -O3 -arch=sm_90 -lineinfo --expt-relaxed-constexpr -I. "${defs[@]}" -o "${2:-kb}" \
  bench/attention/kbench.cu "$src/decode_attention.cu" "$src/prefill_attention.cu" "${extra[@]}"
