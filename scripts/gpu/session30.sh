#!/usr/bin/env bash
# Session 30's prepared calls, one GPU (H100 or H200). Binary: scripts/gpu/build.sh, packed as .gpu-pack
# (docs/DEVELOPING.md), the PyTorch references copied to .gpu-ref (cp ../shared/reference/*.py .gpu-ref/).
# One call <= 600 s.
#   session30.sh F   (~7 min) the activation in the gate_up GEMV's epilogue (planner/compile/act_fusion.hpp):
#     1. self-tests: act (dense bf16 / int8 GEMV, W4A16 v7 against the unfused call + silu_mul), moe (pdl at the end)
#     2. decode steps (context 1024) with PEERPLAN_FUSED_ACT=0 then 1, same binary: Llama-3.1-8B bf16 and W4A16 at
#        batch 1 / 2, Qwen1.5-MoE bf16 at 1 / 2 / 8 (shared experts on the second stream, as a profile since session 21)
#     3. the PyTorch references beside them: torch_ref.py (8B decode) and torch_moe_fp8_ref.py (Qwen1.5-MoE, Mixtral)
#     4. time left: Llama-3.1-8B int8 at 1 / 2 (0 and 1), then step 2 again (the lease's drift)
#   session30.sh M   (~4 min) the MoE dispatch's throttle mixes per expert format: a paced profile of Mixtral-8x7B
#     int8 (its dispatch mixes now timed in int8 as well as bf16), then Mixtral int8 long prompts priced from it
#     (session 30 M ran 0.915 of their price: 0.96-1.00 of the boost price, where bf16's mixes priced 1.10x).
#   session30.sh G   (~6 min) gpt-oss-20b decode steps at 1-4 sequences, context 4096, PDL on / off / on, priced from
#     a paced profile of the lease: why its long-prompt decode ran 1.04-1.06x its price at 2-4 sequences.
set -u
PART=${1:?usage: session30.sh F | M | G}
OUT_DEFAULT=/tmp/peerplan-s30
source "$(dirname "$0")/call_lib.sh"
steps() {  # NAME MODEL PLAN WEIGHTS BATCHES FUSED
  TAIL=8 step 90 "steps-$1-a$6-$SECONDS" env PEERPLAN_FUSED_ACT=$6 PEERPLAN_SHARED_STREAM=1 $B validate --bench-steps --plan "$P/$3" --model "$2" \
    --weights "$4" --machine models/hardware/h200x2-nvlink.json --allow-other-host --no-measure-missing \
    --batches "$5" --context 1024 --prefill 0 --out "$W/steps-$1-a$6-$SECONDS"
}
if [ "$PART" = F ]; then
  selftest() { TAIL=3 step 120 "selftest-$1" env PEERPLAN_SELFTEST_ONLY=$1 $B validate --self-test
    grep -E "act epilogue|FAIL|fail" "$W/selftest-$1.txt" | head -30 | sed 's/^/  | /' | tee -a "$S" >/dev/null; }
  round() { for a in 0 1; do
    steps llama8b llama-3.1-8b llama8b-1gpu.json bf16 1,2 $a
    steps llama8b-int4 llama-3.1-8b llama8b-1gpu.json int4 1,2 $a
    steps qwen qwen1.5-moe-a2.7b qwen-moe-1gpu.json bf16 1,2,8 $a
  done; }
  selftest act
  selftest moe
  round
  TAIL=8 step 130 torch-ref python3 .gpu-ref/torch_ref.py "$W"
  left 330 && TAIL=12 step 110 torch-moe-ref python3 .gpu-ref/torch_moe_fp8_ref.py "$W"
  left 400 && for a in 0 1; do steps llama8b-int8 llama-3.1-8b llama8b-1gpu.json int8 1,2 $a; done
  left 440 && selftest pdl
  left 300 && round  # again, for the lease's drift
  finish
fi
if [ "$PART" = M ]; then
  TAIL=4 step 300 profile $B profile --no-progress --model mixtral-8x7b --dtypes int8 --skip nccl,nccl_nop2p --duty 0.5 \
    --out "$W/profile.json"
  python3 - "$W/profile.json" <<'PY' 2>&1 | tee -a "$S"
import json, sys
t = json.load(open(sys.argv[1])).get("measurements", {}).get("power_throttle", {})
for g in t.get("grouped", []):
    print("  | dispatch %s %s tokens %d: gemm %s" % (g["model"], g.get("dtype", "bf16"), g["tokens"],
          " ".join("%.3f@%.2f" % (m["gemm"], m["attention_share"]) for m in g["mixes"])))
PY
  v mixtral-int8-long 120 --plan $P/mixtral-1gpu.json --model mixtral-8x7b --weights int8 \
    --workload $V/workloads/validate-long-prompt.json
  finish
fi
if [ "$PART" = G ]; then
  # gpt-oss-20b decode at 1-4 sequences and 4k context, PDL on then off, priced from a fresh paced profile of the
  # model: which of the two candidates (runs/2026-12-07-session30 README) its 4-6 % short price at 2-4 sequences is.
  TAIL=4 step 200 profile $B profile --no-progress --model gpt-oss-20b --dtypes bf16 --skip nccl,nccl_nop2p --duty 0.5 \
    --out "$W/profile.json"
  for pdl in 1 0 1; do
    TAIL=10 step 90 "steps-gptoss-pdl$pdl-$SECONDS" env PEERPLAN_PDL=$pdl $B validate --bench-steps \
      --plan $P/gpt-oss-20b-1gpu.json --model gpt-oss-20b --machine "$W/profile.json" --no-measure-missing \
      --batches 1,2,3,4 --context 4096 --prefill 0 --out "$W/steps-gptoss-pdl$pdl-$SECONDS"
  done
  finish
fi
echo "unknown part $PART" >&2; exit 2
