#!/usr/bin/env bash
# Session 20's prepared calls, one GPU. Binary: scripts/gpu/build.sh, packed as .gpu-pack (docs/DEVELOPING.md).
# Each call <= 600 s.
#   session20.sh A   (~8 min, H200: Mixtral needs > 80 GB) the MoE dispatch's own power-throttle mixes
#                    (PowerThrottle::grouped): a paced profile (--duty 0.5) of Qwen1.5-MoE, Mixtral-8x7B and
#                    DeepSeek-V2-Lite, then each model's long prompts priced from it (issue 14's single-GPU
#                    long-prompt validations; DeepSeek-V2-Lite's first)
set -u
PART=${1:?usage: session20.sh A}
OUT_DEFAULT=/tmp/peerplan-s20
source "$(dirname "$0")/call_lib.sh"
if [ "$PART" = A ]; then
  big=$(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits | head -1)
  mixtral=""; [ "$big" -gt 100000 ] && mixtral="--model mixtral-8x7b"   # Mixtral needs more than one H100
  TAIL=26 step 330 profile $B profile --no-progress --model qwen1.5-moe-a2.7b $mixtral --model deepseek-v2-lite \
    --dtypes bf16 --skip nccl,nccl_nop2p --duty 0.5 --out "$W/profile.json"
  [ -n "$mixtral" ] && v mixtral-long 110 --plan $P/mixtral-1gpu.json --model mixtral-8x7b \
    --workload $V/workloads/validate-long-prompt.json
  left 450 && v qwen-moe-long 80 --plan $P/qwen-moe-1gpu.json --model qwen1.5-moe-a2.7b \
    --workload $V/workloads/validate-long-prompt.json
  left 510 && v dsv2-long 85 --plan $P/deepseek-v2-lite-1gpu.json --model deepseek-v2-lite \
    --workload $V/workloads/validate-long-prompt.json
  finish
fi
echo "unknown part $PART" >&2; exit 2
