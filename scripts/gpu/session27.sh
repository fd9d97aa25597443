#!/usr/bin/env bash
# Session 27's prepared calls, one GPU. Binary: scripts/gpu/build.sh, packed as .gpu-pack (docs/DEVELOPING.md).
# One call <= 600 s.
#   session27.sh A   (~4 min, H100 or H200) the 8-bit tensor-core tiled grouped kernel (moe_gemm_w8mma.cu: FP8 /
#     int8 experts' prefill-sized groups on mma.sync m16n8k32 8-bit, the tokens quantized per (row, 64 k)): the
#     MoE self-test (every grouped kernel against fp64), then the same GPU with PEERPLAN_MOE_W8_MMA=0 (the bf16
#     tensor-core kernel it replaces) and =1: decode and prefill steps of Qwen1.5-MoE, DeepSeek-V2-Lite and
#     Mixtral-8x7B in fp8 and int8, and the grouped rows of all three (`profile --only grouped_gemm`) to compare
#     the tiled range row by row. (Session 27 ran it twice on H100s: the first kernel, tokens staged through
#     registers, was no faster; the second stages them by cp.async. Qwen at batch 256 needs more than 80 GB.)
set -u
PART=${1:?usage: session27.sh A}
OUT_DEFAULT=/tmp/peerplan-s27
source "$(dirname "$0")/call_lib.sh"
if [ "$PART" = A ]; then
  TAIL=4 step 150 selftest-moe env PEERPLAN_SELFTEST_ONLY=moe $B validate --self-test
  grep -E "mma8|FAIL|fail" "$W/selftest-moe.txt" | sed 's/^/  | /' | tee -a "$S" >/dev/null
  for mma in 0 1; do
    for m in "qwen-moe qwen1.5-moe-a2.7b 2048 64,128" "deepseek-v2-lite deepseek-v2-lite 2048 64,256" \
             "mixtral mixtral-8x7b 1024 64,256"; do
      set -- $m
      for w in fp8 int8; do
        TAIL=8 step 90 "steps-$2-$w-mma$mma" env PEERPLAN_MOE_W8_MMA=$mma $B validate --bench-steps \
          --plan $P/$1-1gpu.json --model $2 --weights $w --machine models/hardware/h200x2-nvlink.json \
          --allow-other-host --no-measure-missing --batches $4 --context 1024 --prefill $3 --out "$W/steps-$2-$w-mma$mma"
      done
    done
  done
  for mma in 0 1; do
    left 420 && TAIL=3 step 120 "profile-grouped-mma$mma" env PEERPLAN_MOE_W8_MMA=$mma $B profile --no-progress \
      --only grouped_gemm --model qwen1.5-moe-a2.7b,deepseek-v2-lite,mixtral-8x7b --dtypes fp8,int8 --max-tokens 4096 \
      --out "$W/profile-grouped-mma$mma.json"
  done
  finish
fi
echo "unknown part $PART" >&2; exit 2
