#!/usr/bin/env bash
# Session 21's prepared call, one GPU. Binary: scripts/gpu/build.sh, packed as .gpu-pack (docs/DEVELOPING.md).
# One call <= 600 s.
#   session21.sh A   (~9 min, H200: Mixtral needs > 80 GB)
#     1. the shared experts on a second stream (PEERPLAN_SHARED_STREAM, profiler/common/shared_stream.hpp):
#        decode steps of Qwen1.5-MoE and DeepSeek-V2-Lite with it off and on, twice each (~40 s)
#     2. session 20's A: a paced profile (--duty 0.5) of Qwen1.5-MoE, Mixtral-8x7B and DeepSeek-V2-Lite with
#        the MoE dispatch's own throttle mixes, then each model's long prompts priced from it
set -u
PART=${1:?usage: session21.sh A}
OUT_DEFAULT=/tmp/peerplan-s21
source "$(dirname "$0")/call_lib.sh"
if [ "$PART" = A ]; then
  SHIPPED=models/hardware/h200x2-nvlink.json   # prices only; the figures compared are the measured steps
  for r in 1 2; do
    for s in 0 1; do
      for m in qwen1.5-moe-a2.7b:$P/qwen-moe-1gpu.json deepseek-v2-lite:$P/deepseek-v2-lite-1gpu.json; do
        PEERPLAN_SHARED_STREAM=$s TAIL=9 step 30 "steps-${m%%:*}-s$s-r$r" $B validate --bench-steps --plan "${m#*:}" \
          --model "${m%%:*}" --machine $SHIPPED --allow-other-host --no-measure-missing --batches 1,2,8,32,64 \
          --context 1024 --prefill 0 --out "$W/steps-${m%%:*}-s$s-r$r"
      done
    done
  done
  python3 scripts/gpu/shared_stream_ab.py "$W" 2>&1 | tee -a "$S"
  big=$(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits | head -1)
  mixtral=""; [ "$big" -gt 100000 ] && mixtral="--model mixtral-8x7b"   # Mixtral needs more than one H100
  TAIL=26 step 330 profile $B profile --no-progress --model qwen1.5-moe-a2.7b $mixtral --model deepseek-v2-lite \
    --dtypes bf16 --skip nccl,nccl_nop2p --duty 0.5 --out "$W/profile.json"
  [ -n "$mixtral" ] && v mixtral-long 110 --plan $P/mixtral-1gpu.json --model mixtral-8x7b \
    --workload $V/workloads/validate-long-prompt.json
  left 480 && v qwen-moe-long 80 --plan $P/qwen-moe-1gpu.json --model qwen1.5-moe-a2.7b \
    --workload $V/workloads/validate-long-prompt.json
  left 515 && v dsv2-long 80 --plan $P/deepseek-v2-lite-1gpu.json --model deepseek-v2-lite \
    --workload $V/workloads/validate-long-prompt.json
  hbm=$(zcat -f "$W/profile.json"* 2>/dev/null | python3 -c "import json,sys; m=json.load(sys.stdin); m=m.get('measurements', m); print(max(m.get('hbm_gbps', [0]) or [0]))" 2>/dev/null)
  [ -n "$hbm" ] && python3 scripts/gpu/shared_stream_ab.py "$W" "$hbm" 2>&1 | tee -a "$S"
  finish
fi
echo "unknown part $PART" >&2; exit 2
