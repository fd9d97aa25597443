#!/usr/bin/env bash
# Session 28's prepared calls, one GPU. Binary: scripts/gpu/build.sh, packed as .gpu-pack (docs/DEVELOPING.md).
# One call <= 600 s.
#   session28.sh A   (~8 min, H100 or H200) MXFP4 routed experts (gpt-oss; moe_gemm_mxfp4.cu): the MoE self-test
#     (every grouped kernel against fp64, the mxfp4 and 8-bit tensor-core rows among them), gpt-oss-20b's decode and
#     prefill steps with its MXFP4 experts and with bf16 ones, then session 27's 8-bit tensor-core A/B
#     (PEERPLAN_MOE_W8_MMA=0 vs 1) as far as the time allows.
#   session28.sh B   (~8 min, H100 or H200) gpt-oss-20b validated: a paced profile of this lease with its models'
#     MXFP4 grouped rows, its steps against that profile's prices, chat and long-prompt workloads.
#   session28.sh C   (~9 min) the self-test and B's profile, steps and chat run in one call, then bf16 experts' steps.
#   session28.sh D   (~8 min) the self-test again (C's cuBLAS-path MXFP4 rows asked for shapes that path never takes),
#     a paced profile of both gpt-oss models, gpt-oss-120b chat on one GPU, gpt-oss-20b long prompts.
set -u
PART=${1:?usage: session28.sh A | B | C | D}
OUT_DEFAULT=/tmp/peerplan-s28
source "$(dirname "$0")/call_lib.sh"
mkplan gptoss 24
if [ "$PART" = A ]; then
  TAIL=4 step 180 selftest-moe env PEERPLAN_SELFTEST_ONLY=moe $B validate --self-test
  grep -E "mxfp4|mma8|FAIL|fail" "$W/selftest-moe.txt" | sed 's/^/  | /' | tee -a "$S" >/dev/null
  for w in mxfp4 bf16; do
    wflag=(); [ "$w" = bf16 ] && wflag=(--weights bf16)
    TAIL=10 step 120 "steps-gptoss20b-$w" $B validate --bench-steps --plan "$W/gptoss.plan.json" --model gpt-oss-20b \
      "${wflag[@]}" --machine models/hardware/h200x2-nvlink.json --allow-other-host --no-measure-missing \
      --batches 1,8,32,64 --context 1024 --prefill 2048 --out "$W/steps-gptoss20b-$w"
  done
  for mma in 0 1; do
    for m in "qwen-moe qwen1.5-moe-a2.7b 2048 64,128" "mixtral mixtral-8x7b 1024 64,256"; do
      set -- $m
      for w in fp8 int8; do
        left 540 && TAIL=8 step 60 "steps-$2-$w-mma$mma" env PEERPLAN_MOE_W8_MMA=$mma $B validate --bench-steps \
          --plan $P/$1-1gpu.json --model $2 --weights $w --machine models/hardware/h200x2-nvlink.json \
          --allow-other-host --no-measure-missing --batches $4 --context 1024 --prefill $3 --out "$W/steps-$2-$w-mma$mma"
      done
    done
  done
  finish
fi
if [ "$PART" = B ]; then
  TAIL=4 step 200 profile $B profile --no-progress --model gpt-oss-20b --dtypes bf16 --skip nccl,nccl_nop2p --duty 0.5 \
    --out "$W/profile.json"
  grep -c '"dtype": *"mxfp4"' "$W/profile.json" | sed 's/^/  | mxfp4 grouped rows: /' | tee -a "$S" >/dev/null
  TAIL=10 step 90 steps-gptoss20b-priced $B validate --bench-steps --plan "$W/gptoss.plan.json" --model gpt-oss-20b \
    --machine "$W/profile.json" --batches 1,8,32,64 --context 1024 --prefill 2048 --out "$W/steps-gptoss20b-priced"
  left 400 && v gptoss20b-chat 100 --plan "$W/gptoss.plan.json" --model gpt-oss-20b --workload $V/workloads/validate-chat.json
  left 480 && v gptoss20b-long 100 --plan "$W/gptoss.plan.json" --model gpt-oss-20b \
    --workload $V/workloads/validate-long-prompt.json
  finish
fi
if [ "$PART" = C ]; then  # A's MXFP4 half and B in one call, when starts are scarce
  TAIL=4 step 180 selftest-moe env PEERPLAN_SELFTEST_ONLY=moe $B validate --self-test
  grep -E "mxfp4|mma8|FAIL|fail" "$W/selftest-moe.txt" | sed 's/^/  | /' | tee -a "$S" >/dev/null
  TAIL=4 step 200 profile $B profile --no-progress --model gpt-oss-20b --dtypes bf16 --skip nccl,nccl_nop2p --duty 0.5 \
    --out "$W/profile.json"
  grep -c '"dtype": *"mxfp4"' "$W/profile.json" | sed 's/^/  | mxfp4 grouped rows: /' | tee -a "$S" >/dev/null
  TAIL=10 step 90 steps-gptoss20b-priced $B validate --bench-steps --plan "$W/gptoss.plan.json" --model gpt-oss-20b \
    --machine "$W/profile.json" --batches 1,8,32,64 --context 1024 --prefill 2048 --out "$W/steps-gptoss20b-priced"
  left 420 && v gptoss20b-chat 100 --plan "$W/gptoss.plan.json" --model gpt-oss-20b --workload $V/workloads/validate-chat.json
  left 470 && TAIL=10 step 60 steps-gptoss20b-bf16 $B validate --bench-steps --plan "$W/gptoss.plan.json" \
    --model gpt-oss-20b --weights bf16 --machine "$W/profile.json" --no-measure-missing --batches 1,8,32,64 \
    --context 1024 --prefill 2048 --out "$W/steps-gptoss20b-bf16"
  finish
fi
if [ "$PART" = D ]; then  # after C: the fixed cuBLAS-path self-test rows, gpt-oss-120b on one GPU, gpt-oss-20b long prompts
  TAIL=4 step 120 selftest-moe env PEERPLAN_SELFTEST_ONLY=moe $B validate --self-test
  grep -E "mxfp4|FAIL|fail" "$W/selftest-moe.txt" | sed 's/^/  | /' | tee -a "$S" >/dev/null
  # Both models share their dense and attention shapes (hidden 2880, 64 x 64 query heads, 8 kv heads): the 120b adds
  # its grouped rows only.
  TAIL=4 step 240 profile $B profile --no-progress --model gpt-oss-20b,gpt-oss-120b --dtypes bf16 \
    --skip nccl,nccl_nop2p --duty 0.5 --out "$W/profile.json"
  mkplan gptoss120 36
  v gptoss120b-chat 150 --plan "$W/gptoss120.plan.json" --model gpt-oss-120b --workload $V/workloads/validate-chat.json
  left 430 && v gptoss20b-long 150 --plan "$W/gptoss.plan.json" --model gpt-oss-20b \
    --workload $V/workloads/validate-long-prompt.json
  finish
fi
echo "unknown part $PART" >&2; exit 2
