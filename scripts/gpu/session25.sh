#!/usr/bin/env bash
# Session 25's prepared calls, one GPU (H100 or H200). Binary: scripts/gpu/build.sh, packed as .gpu-pack
# (docs/DEVELOPING.md). One call <= 600 s.
#   session25.sh Q   (~7 min) int8 routed experts (moe_gemm_fp8.cu's kernels with int8 codes; cuBLASLt int8 per
#     expert on the eager path), their first GPU run:
#     1. the MoE self-test (its int8 rows: gemv, stream with and without the k split, tiled, the eager dispatch)
#     2. Qwen1.5-MoE decode (batch 1/8/32/64, context 1024) and 2048-token prefill steps in int8, fp8 and bf16,
#        same lease, beside the shared reference's bf16 MoE step (torch_moe_fp8_ref.py's moe_case)
#     3. a profile of Qwen1.5-MoE and Mixtral-8x7B with --dtypes bf16,int8 (int8 grouped rows and W8A8 dense rows),
#        int8 steps of both priced from it (batch 1-64), then --weights int8 chat runs of both and Mixtral's long
#        prompts (Mixtral int8: 47 GB, fits an H100)
#     4. session24.sh S's int4 k-split A/B, one round each way, when time is left
#     5. on an H200 with time left: session22.sh M (Mixtral-8x7B bf16 long prompts from a paced profile of its own)
#   session25.sh q   (~3 min) Q's first part alone, for a lease with little device time left: the self-test, Qwen1.5-MoE
#     int8 and bf16 steps beside the reference, a profile of Qwen1.5-MoE (bf16,int8), int8 steps priced from it and
#     its int8 chat run
set -u
PART=${1:?usage: session25.sh Q | q}
OUT_DEFAULT=/tmp/peerplan-s25
source "$(dirname "$0")/call_lib.sh"
REF=${REF:-.gpu-ref}; [ -d ../shared/reference ] && REF=../shared/reference
selftest_int8() {
  TAIL=3 step 150 selftest-moe env PEERPLAN_SELFTEST_ONLY=moe $B validate --self-test
  grep -E "int8" "$W/selftest-moe.txt" | grep -v " ok$" | head -30 | sed 's/^/  | int8 not ok: /' | tee -a "$S" >/dev/null
  grep -cE "int8.* ok$" "$W/selftest-moe.txt" | sed 's/^/  | int8 rows ok: /' | tee -a "$S" >/dev/null
  grep -E "moe_" "$W/selftest-moe.txt" | grep -vcE " ok$" | sed 's/^/  | moe rows not ok (any format): /' | tee -a "$S" >/dev/null
}
steps() {  # NAME MODEL-PLAN MODEL WEIGHTS MACHINE BATCHES PREFILL [extra]
  local name=$1 plan=$2 model=$3 w=$4 m=$5 b=$6 pf=$7; shift 7
  TAIL=10 step 70 "$name" $B validate --bench-steps --plan $P/$plan-1gpu.json --model $model --weights $w --machine "$m" \
    --batches $b --context 1024 --prefill $pf --out "$W/$name" "$@"
}
torch_ref_qwen() {  # the shared reference's bf16 MoE step of Qwen1.5-MoE, same lease
  TAIL=3 step 120 torch-ref-qwen python3 -c "import sys, json; sys.path.insert(0, '$REF'); import torch_moe_fp8_ref as r
out = {'torch': r.torch.__version__, 'gpu': r.torch.cuda.get_device_name(0)}
r.moe_case('qwen1.5-moe-a2.7b', r.MOE['qwen1.5-moe-a2.7b'], out)
json.dump(out, open('$W/torch_moe_ref_qwen.json', 'w'), indent=1)"
}
if [ "$PART" = q ]; then
  selftest_int8
  for w in int8 bf16; do
    steps "steps-qwen-$w" qwen-moe qwen1.5-moe-a2.7b $w models/hardware/h200x2-nvlink.json 1,8,32,64 2048 \
      --allow-other-host --no-measure-missing
  done
  torch_ref_qwen
  TAIL=4 step 120 profile $B profile --no-progress --model qwen1.5-moe-a2.7b --dtypes bf16,int8 \
    --skip nccl,nccl_nop2p --out "$W/profile.json"
  steps steps-qwen-int8-priced qwen-moe qwen1.5-moe-a2.7b int8 "$W/profile.json" 1,2,4,8,16,32,64 2048
  v qwen-int8-chat 100 --plan $P/qwen-moe-1gpu.json --model qwen1.5-moe-a2.7b --weights int8 \
    --workload $V/workloads/validate-chat.json
  finish
fi
if [ "$PART" = Q ]; then
  selftest_int8
  for w in int8 fp8 bf16; do
    steps "steps-qwen-$w" qwen-moe qwen1.5-moe-a2.7b $w models/hardware/h200x2-nvlink.json 1,8,32,64 2048 \
      --allow-other-host --no-measure-missing
  done
  torch_ref_qwen
  TAIL=4 step 200 profile $B profile --no-progress --model qwen1.5-moe-a2.7b,mixtral-8x7b --dtypes bf16,int8 \
    --skip nccl,nccl_nop2p --out "$W/profile.json"
  grep -o '"dtype": *"int8"' "$W/profile.json" 2>/dev/null | wc -l | sed 's/^/  | int8 rows in the profile: /' | tee -a "$S" >/dev/null
  steps steps-qwen-int8-priced qwen-moe qwen1.5-moe-a2.7b int8 "$W/profile.json" 1,2,4,8,16,32,64 2048
  steps steps-mixtral-int8-priced mixtral mixtral-8x7b int8 "$W/profile.json" 1,2,4,8,16,32,64 2048
  v qwen-int8-chat 100 --plan $P/qwen-moe-1gpu.json --model qwen1.5-moe-a2.7b --weights int8 \
    --workload $V/workloads/validate-chat.json
  left 420 && v mixtral-int8-chat 100 --plan $P/mixtral-1gpu.json --model mixtral-8x7b --weights int8 \
    --workload $V/workloads/validate-chat.json
  left 480 && v mixtral-int8-long 100 --plan $P/mixtral-1gpu.json --model mixtral-8x7b --weights int8 \
    --workload $V/workloads/validate-long-prompt.json
  for f in 1 4; do  # session24.sh S, one round each way
    left 530 || break
    TAIL=9 step 30 "steps-mixtral-int4-f$f" env PEERPLAN_INT4_SPLIT_WARPS=$f $B validate --bench-steps \
      --plan $P/mixtral-1gpu.json --model mixtral-8x7b --weights int4 --machine models/hardware/h200x2-nvlink.json \
      --allow-other-host --no-measure-missing --batches 1,2,4,8,16,32,64 --context 1024 --prefill 0 \
      --out "$W/steps-mixtral-int4-f$f"
  done
  big=$(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits | awk '{print ($1 > 120000)}')
  if [ "$big" = 1 ] && left 400; then  # session22.sh M: 93 GB of bf16 weights, an H200 only
    TAIL=4 step 150 profile-m $B profile --no-progress --model mixtral-8x7b --dtypes bf16 --skip nccl,nccl_nop2p \
      --duty 0.5 --out "$W/profile-m.json"
    left 500 && TAIL=16 step 85 validate-mixtral-bf16-long $B validate --machine "$W/profile-m.json" \
      --out "$W/validate-mixtral-bf16-long" --plan $P/mixtral-1gpu.json --model mixtral-8x7b \
      --workload $V/workloads/validate-long-prompt.json
  fi
  finish
fi
echo "unknown part $PART" >&2; exit 2
