#!/usr/bin/env bash
# The two-GPU validations issues 14 and 18 ask for, one device call per part on `nvidia-h200-x2` (two H200 joined
# by NVLink; carry [".gpu", ".gpu-ref"]; build with scripts/gpu/build.sh). Each part profiles the host first (both
# GPUs, NCCL curves included) and predicts only from that profile.
#   scripts/gpu/x2_moe_long.sh moe   (~9 min) issue 14: routed MoE across two GPUs. Mixtral-8x7B EP2 and TP2 and
#                                    Qwen1.5-MoE EP2 on the long-prompt workload, DeepSeek-V2-Lite TP2 on chat.
#   scripts/gpu/x2_moe_long.sh long  (~9 min) issue 18: Llama-3.1-70B TP2 under long prompts (8k-32k, then a
#                                    short 64k-100k run if time is left).
# Plans: docs/validation/plans/{mixtral,qwen-moe,deepseek-v2-lite}-{ep2,tp2}.json, llama70b-tp2.json (each
# simulates on the shipped 2xH200 profile: checked on CPU when they were written).
# Outputs under $OUT (summary-*.txt and a tgz of the raw files).
set -u
PART=${1:?usage: x2_moe_long.sh moe|long}
OUT_DEFAULT=/tmp/peerplan-x2
source "$(dirname "$0")/call_lib.sh"
LP=$V/workloads/validate-long-prompt.json
if [ "$PART" = moe ]; then
  TAIL=4 step 240 profile $B profile --no-progress --model mixtral-8x7b --model qwen1.5-moe-a2.7b --model deepseek-v2-lite \
    --dtypes bf16 --out "$W/profile.json"
  v mixtral-ep2-long 90 --plan $P/mixtral-ep2.json --model mixtral-8x7b --workload $LP --requests 40
  v qwen-moe-ep2-long 75 --plan $P/qwen-moe-ep2.json --model qwen1.5-moe-a2.7b --workload $LP --requests 40
  left 430 && v mixtral-tp2-long 80 --plan $P/mixtral-tp2.json --model mixtral-8x7b --workload $LP --requests 40
  left 500 && v dsv2-tp2-chat 70 --plan $P/deepseek-v2-lite-tp2.json --model deepseek-v2-lite \
    --workload $V/workloads/validate-chat.json --requests 60
  finish
fi
if [ "$PART" = long ]; then
  TAIL=4 step 240 profile $B profile --no-progress --model llama-3.1-70b --dtypes bf16 --out "$W/profile.json"
  # Rates the two GPUs keep up with (simulated on the shipped profile: 8k-32k, 16 requests at 0.3/s, 68 s of
  # serving; 64k-100k, 3 at 0.05/s, ~100 s), so the run measures long-context iterations, not a queue.
  v llama70b-tp2-8k-32k 170 --plan $P/llama70b-tp2.json --model llama-3.1-70b --workload models/workloads/long-prompt-8k-32k.json \
    --requests 16 --rate 0.3
  left 330 && v llama70b-tp2-64k-100k 200 --plan $P/llama70b-tp2.json --model llama-3.1-70b \
    --workload models/workloads/long-prompt-64k-100k.json --requests 3 --rate 0.05
  finish
fi
echo "unknown part $PART (moe or long)" >&2; exit 2
