#!/usr/bin/env bash
# Session 21's prepared calls, one GPU. Binary: scripts/gpu/build.sh, packed as .gpu-pack (docs/DEVELOPING.md).
# One call <= 600 s.
#   session21.sh A   (~9 min, H200: Mixtral needs > 80 GB)
#     1. the shared experts on a second stream (PEERPLAN_SHARED_STREAM, profiler/common/shared_stream.hpp):
#        decode steps of Qwen1.5-MoE and DeepSeek-V2-Lite with it off and on (prices: the shipped profile's)
#     2. a paced profile (--duty 0.5) of Qwen1.5-MoE, Mixtral-8x7B and DeepSeek-V2-Lite with the MoE dispatch's
#        own throttle mixes (session 20's A)
#     3. step 1 again, priced from that profile: off as it is, on from a copy whose meta says
#        executor_shared_stream
#     4. Mixtral's long prompts priced from the profile (then Qwen1.5-MoE's if time is left)
#   session21.sh B PROFILE   (~3 min, the same lease: PROFILE is A's profile.json, brought back and placed in
#     the working tree) Qwen1.5-MoE's and DeepSeek-V2-Lite's long prompts priced from it
set -u
PART=${1:?usage: session21.sh A | B PROFILE}
OUT_DEFAULT=/tmp/peerplan-s21
source "$(dirname "$0")/call_lib.sh"
long() { v "$1" "$2" --plan "$3" --model "$4" --workload $V/workloads/validate-long-prompt.json; }
if [ "$PART" = A ]; then
  ab() {  # ab TAG MACHINE_OFF MACHINE_ON [EXTRA...]: both models' decode steps, one stream then two
    local tag=$1 off=$2 on=$3; shift 3
    for run in qwen1.5-moe-a2.7b:qwen-moe deepseek-v2-lite:deepseek-v2-lite; do
      IFS=: read -r model plan <<< "$run"
      for s in 0 1; do
        prof=$off; [ $s = 1 ] && prof=$on
        PEERPLAN_SHARED_STREAM=$s TAIL=9 step 40 "steps-$model-s$s-$tag" $B validate --bench-steps --plan $P/$plan-1gpu.json \
          --model $model --machine "$prof" --no-measure-missing --batches 1,2,8,32,64 --context 1024 --prefill 0 \
          --out "$W/steps-$model-s$s-$tag" "$@"
      done
    done
  }
  # 1. The executor's gain alone first (a call cut short still has it): priced from the shipped profile.
  ab r1 models/hardware/h200x2-nvlink.json models/hardware/h200x2-nvlink.json --allow-other-host
  python3 scripts/gpu/shared_stream_ab.py "$W" 2>&1 | tee -a "$S"
  big=$(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits | head -1)
  mixtral=""; [ "$big" -gt 100000 ] && mixtral="--model mixtral-8x7b"   # Mixtral needs more than one H100
  TAIL=26 step 330 profile $B profile --no-progress --model qwen1.5-moe-a2.7b $mixtral --model deepseek-v2-lite \
    --dtypes bf16 --skip nccl,nccl_nop2p --duty 0.5 --out "$W/profile.json"
  python3 -c "import json,sys; m=json.load(open(sys.argv[1])); m.setdefault('meta',{})['executor_shared_stream']=True; \
json.dump(m, open(sys.argv[2],'w'))" "$W/profile.json" "$W/profile-shared-stream.json"
  # 2. Again priced from this GPU's profile: one stream, and two as its copy with executor_shared_stream prices.
  ab r2 "$W/profile.json" "$W/profile-shared-stream.json"
  hbm=$(python3 -c "import json,sys; m=json.load(open(sys.argv[1])); m=m.get('measurements', m); print(max(m.get('hbm_gbps', [0]) or [0]))" "$W/profile.json" 2>/dev/null)
  python3 scripts/gpu/shared_stream_ab.py "$W" "${hbm:-0}" 2>&1 | tee -a "$S"
  [ -n "$mixtral" ] && long mixtral-long 110 $P/mixtral-1gpu.json mixtral-8x7b
  left 480 && long qwen-moe-long 80 $P/qwen-moe-1gpu.json qwen1.5-moe-a2.7b
  finish
fi
if [ "$PART" = B ]; then
  PROF=${2:?usage: session21.sh B PROFILE}
  mkdir -p "$W"; zcat -f "$PROF" > "$W/profile.json"
  long qwen-moe-long 90 $P/qwen-moe-1gpu.json qwen1.5-moe-a2.7b
  long dsv2-long 90 $P/deepseek-v2-lite-1gpu.json deepseek-v2-lite
  finish
fi
echo "unknown part $PART" >&2; exit 2
