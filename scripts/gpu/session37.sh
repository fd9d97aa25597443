#!/usr/bin/env bash
# Session 37's prepared call, one GPU (any). Binary: scripts/gpu/build.sh, packed as .gpu-pack (docs/DEVELOPING.md).
#   session37.sh A   (~7 min) the small kernels before a PDL GEMV (planner/cost/gemv_prefetch.hpp, fitted offline on four
#     leases' one-stream steps) out of sample: a fresh profile of Llama-3.1-8B, Qwen1.5-MoE and DeepSeek-V2-Lite (so
#     Llama's norms are timed as chains, as no recorded Llama run's profile did), their decode steps at 1 / 2 / 4 / 8
#     sequences (the MoE models on one and two streams), then Qwen1.5-MoE chat (400 requests, two streams) while time
#     is left. Re-price here with `validate --reprice` (binary before and after the rule).
set -u
PART=${1:?usage: session37.sh A}
OUT_DEFAULT=/tmp/peerplan-s37
source "$(dirname "$0")/call_lib.sh"
if [ "$PART" = A ]; then
  TAIL=4 step 240 profile $B profile --no-progress --model llama-3.1-8b,qwen1.5-moe-a2.7b,deepseek-v2-lite --dtypes bf16 \
    --skip nccl,nccl_nop2p --out "$W/profile.json"
  python3 -c "import json, sys; print('  launch:', json.load(open(sys.argv[1]))['measurements']['extra']['launch'])" \
    "$W/profile.json" 2>&1 | tee -a "$S"
  bench 8b llama-3.1-8b llama8b-1gpu.json bf16 1,2,4,8 1024
  for st in 1 0; do
    bench "qwen-s$st" qwen1.5-moe-a2.7b qwen-moe-1gpu.json bf16 1,2,4,8 1024 PEERPLAN_SHARED_STREAM=$st
    bench "dsv2-s$st" deepseek-v2-lite deepseek-v2-lite-1gpu.json bf16 1,2,4,8 1024 PEERPLAN_SHARED_STREAM=$st
  done
  left 400 && v qwen-chat 170 --plan $P/qwen-moe-1gpu.json --model qwen1.5-moe-a2.7b --weights bf16 \
    --workload $V/workloads/validate-chat.json --requests 400
  finish
fi
echo "unknown part $PART" >&2; exit 2
