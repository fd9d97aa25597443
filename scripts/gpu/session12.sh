#!/usr/bin/env bash
# Session 12 (2026-12-04) device calls; build with scripts/gpu/build.sh, carry .gpu (or the packed
# .gpu-pack/gpu.tar.xz, see docs/DEVELOPING.md).
#   scripts/gpu/session12.sh A   (one H200, ~8 min) 1. session 11 E: does validate's in-process measurement of
#                                the shapes a profile lacks slow Qwen1.5-MoE's serving decode (2.95 vs 2.80 ms)?
#                                2. the attention study grid (quarter octaves in q_len and context, every decode
#                                batch to 16) of Llama-3.1-8B's, Qwen1.5-MoE's and DeepSeek-V2-Lite's heads, the
#                                data the 3 % grid of issue 18 is chosen from offline.
#   scripts/gpu/session12.sh B   (one H200, ~9 min) issue 23's shipped MoE models on the real trace: the profile
#                                `peerplan profile` writes by default (nothing else measured by hand), then
#                                Qwen1.5-MoE-A2.7B and DeepSeek-V2-Lite on the Azure conversation trace, each
#                                validate measuring the shapes the profile lacks in a child process (A's finding).
set -u
PART=${1:-A}
OUT_DEFAULT=/tmp/peerplan-s12
source "$(dirname "$0")/call_lib.sh"
if [ "$PART" = A ]; then
  TAIL=3 step 150 profile $B profile --no-progress --model qwen1.5-moe-a2.7b --dtypes bf16 --skip nccl,nccl_nop2p --out "$W/profile.json"
  v qwen-moe-long 70 --plan $P/qwen-moe-1gpu.json --model qwen1.5-moe-a2.7b --workload $V/workloads/validate-long-prompt.json
  TAIL=16 step 70 validate-qwen-moe-long-extended $B validate --machine "$W/validate-qwen-moe-long/machine-extended.json" \
    --out "$W/validate-qwen-moe-long-extended" --plan $P/qwen-moe-1gpu.json --model qwen1.5-moe-a2.7b \
    --workload $V/workloads/validate-long-prompt.json
  TAIL=6 step 30 steps-qwen $B validate --bench-steps --plan $P/qwen-moe-1gpu.json --model qwen1.5-moe-a2.7b \
    --machine "$W/profile.json" --batches 1,2 --context 3000 --prefill 0 --out "$W/steps-qwen"
  left 420 && PEERPLAN_ATTENTION_GRID=study TAIL=2 step 150 study $B profile --no-progress --only attention \
    --model llama-3.1-8b --model qwen1.5-moe-a2.7b --model deepseek-v2-lite --samples 10 --warmup 2 --out "$W/study.json"
  finish
fi
if [ "$PART" = B ]; then
  TAIL=3 step 330 profile $B profile --no-progress --out "$W/profile.json"
  AZ="--workload $V/workloads/azure-conv.json --requests 120"
  left 400 && v qwen-moe-azure-conv 130 --plan $P/qwen-moe-1gpu.json --model qwen1.5-moe-a2.7b $AZ
  left 470 && v dsv2-azure-conv 120 --plan $P/deepseek-v2-lite-1gpu.json --model deepseek-v2-lite $AZ
  finish
fi
