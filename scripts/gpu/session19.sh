#!/usr/bin/env bash
# Session 19's prepared calls, one GPU (kind nvidia-h200; an H100 also serves R). Binary: scripts/gpu/build.sh,
# packed as .gpu-pack (docs/DEVELOPING.md). Each call <= 600 s.
#   session19.sh R   (~5 min) the executor's decode steps with programmatic dependent launch off and on, beside the
#                    PyTorch references in the same lease (.gpu-ref/torch_ref.py: 8B bf16 decode and prefill;
#                    .gpu-ref/torch_moe_fp8_ref.py: routed MoE decode, FP8 GEMM stacks): Qwen1.5-MoE and 8B bf16
#                    at batch 1/8/32/64, 8B FP8 at 1/8/32/64, 8B W4A16 at 1/2 (issue 15's 1.3x), Mixtral where
#                    it fits (H200)
#   session19.sh S   (~8 min, H200: Mixtral needs > 80 GB) the MoE self-test (the route kernel sized to the
#                    experts), issue 14's table with PDL on (the default since
#                    session 19): bench/moe/run.sh (Qwen1.5-MoE and Mixtral decode b=1/8/32/64 beside
#                    torch._grouped_mm, the b=1 touched-bytes bound), batch 1 with PDL off for the A/B; then
#                    issue 15's W4A16 v7 four GEMMs at M=1/2 (bench/quant qb, staged as .gpu/bin/qb) PDL on / off
#   session19.sh C   (~9 min, H200; on an H100 without Mixtral) MoE serving with PDL on (the default): a paced Qwen1.5-MoE + Mixtral profile
#                    (--duty 0.5), then priced from it Qwen chat (40 requests at 8/s: decode-heavy, where PDL
#                    moves the step most), Mixtral and Qwen long prompts (session17.sh C's runs), as time allows
#   session19.sh D   (~4 min, one GPU) the per-kernel floor timed with PDL (launch_overhead: gpu_gap_pdl_us): a
#                    profile of Qwen1.5-MoE and 8B as Q's, steps priced from it, Qwen and 8B chat
#   session19.sh E   (~5 min, H200) Mixtral-8x7B long prompts with PDL and its floor, from a paced Mixtral profile
#   session19.sh F   (~2 min, one GPU; ran once, the variant was dropped) the grouped gemv's first weight batch
#                    prefetched into L2 before the tile's rows are read: MoE self-test, then decode steps of the binary before it (.gpu/bin/peerplan-old)
#                    and after, old / new / old / new: Qwen1.5-MoE b=1,2,4,8, Mixtral b=1,2 where it fits
set -u
PART=${1:?usage: session19.sh R|S|C|D|E|F}
OUT_DEFAULT=/tmp/peerplan-s19
source "$(dirname "$0")/call_lib.sh"
M=models/hardware/h200x2-nvlink.json  # topology only: bench-steps times this host's GPU 0
steps() {  # NAME PDL ARGS...: decode steps of one plan with PEERPLAN_PDL=PDL
  local name=$1 pdl=$2; shift 2
  TAIL=8 step 120 "steps-$name-pdl$pdl" env PEERPLAN_PDL=$pdl $B validate --bench-steps --machine $M --allow-other-host --no-measure-missing \
    --context 1024 --out "$W/steps-$name-pdl$pdl" "$@"
}
if [ "$PART" = R ]; then
  big=$(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits | head -1)
  for pdl in 0 1; do
    steps qwen $pdl --plan $P/qwen-moe-1gpu.json --model qwen1.5-moe-a2.7b --batches 1,8,32,64 --prefill 0
    steps bf16 $pdl --plan $P/llama8b-1gpu.json --model llama-3.1-8b --batches 1,8,32,64 --prefill 2048
    steps fp8 $pdl --plan $P/llama8b-1gpu.json --model llama-3.1-8b --weights fp8 --batches 1,8,32,64 --prefill 0
    steps int4 $pdl --plan $P/llama8b-1gpu.json --model llama-3.1-8b --weights int4 --batches 1,2 --prefill 0
    [ "$big" -gt 100000 ] && steps mixtral $pdl --plan $P/mixtral-1gpu.json --model mixtral-8x7b --batches 1,8,32,64 --prefill 0
  done
  TAIL=6 step 200 torch-ref python3 .gpu-ref/torch_ref.py "$W"
  TAIL=8 step 200 torch-moe-ref python3 .gpu-ref/torch_moe_fp8_ref.py "$W"
  finish
fi
if [ "$PART" = S ]; then
  # The route kernel sized to the experts (moe_route_threads) against the CPU reference, and its timings.
  TAIL=4 step 120 selftest-moe env PEERPLAN_SELFTEST_ONLY=moe $B validate --self-test
  grep -iE "fail|route" "$W/selftest-moe.txt" | head -24 | sed 's/^/  | /' | tee -a "$S" >/dev/null
  TAIL=60 step 420 moe-bench env OUT="$W/moe-out" MOE_W="$W/moe" UNFUSED_AB=0 PREFILL_AB=0 STEP_S=90 \
    bash bench/moe/run.sh .gpu
  cp "$W/moe-out/summary.txt" "$W/moe-summary.txt" 2>/dev/null
  for m in qwen1.5-moe-a2.7b:bench/moe/qwen1.5-moe-1gpu.json mixtral-8x7b:$P/mixtral-1gpu.json; do
    left 470 && TAIL=4 step 60 "steps-${m%%:*}-pdl0" env PEERPLAN_PDL=0 $B validate --bench-steps --plan "${m#*:}" \
      --model "${m%%:*}" --machine "$W/moe/profile-hbm.json" --allow-other-host --no-measure-missing --batches 1 \
      --context 1024 --prefill 0 --out "$W/steps-${m%%:*}-pdl0"
  done
  for pdl in 1 0; do
    left 540 && TAIL=3 step 60 "qb-pdl$pdl" env PEERPLAN_PDL=$pdl QB_W4_ONLY=1 QB_W4_VARIANTS=7 .gpu/bin/qb "$W/qb-pdl$pdl" \
      && grep -E "four GEMMs" "$W/qb-pdl$pdl.txt" | sed "s/^/  | pdl$pdl /" | tee -a "$S" >/dev/null
  done
  rm -rf "$W/moe-out/moe.tgz"
  finish
fi
if [ "$PART" = C ]; then
  big=$(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits | head -1)
  mixtral=""; [ "$big" -gt 100000 ] && mixtral="--model mixtral-8x7b"   # Mixtral needs more than one H100
  TAIL=12 step 330 profile $B profile --no-progress --model qwen1.5-moe-a2.7b $mixtral --dtypes bf16 \
    --skip nccl,nccl_nop2p --duty 0.5 --out "$W/profile.json"
  grep -E "executor_launch" "$W/profile.json" | head -2 | sed 's/^/  | /' | tee -a "$S" >/dev/null
  v qwen-chat 70 --plan $P/qwen-moe-1gpu.json --model qwen1.5-moe-a2.7b --workload $V/workloads/validate-chat.json \
    --requests 40 --rate 8
  [ -n "$mixtral" ] && left 480 && v mixtral-long 100 --plan $P/mixtral-1gpu.json --model mixtral-8x7b \
    --workload $V/workloads/validate-long-prompt.json
  left 500 && v qwen-moe-long 80 --plan $P/qwen-moe-1gpu.json --model qwen1.5-moe-a2.7b --workload $V/workloads/validate-long-prompt.json
  finish
fi
if [ "$PART" = D ]; then
  TAIL=8 step 300 profile $B profile --no-progress --model llama-3.1-8b --model qwen1.5-moe-a2.7b --dtypes bf16 \
    --skip nccl,nccl_nop2p --out "$W/profile.json"
  grep -A4 '"launch"' "$W/profile.json" | head -8 | sed 's/^/  | /' | tee -a "$S" >/dev/null
  TAIL=8 step 60 steps-qwen $B validate --bench-steps --machine "$W/profile.json" --plan $P/qwen-moe-1gpu.json \
    --model qwen1.5-moe-a2.7b --batches 1,2,4,8 --context 1024 --prefill 0 --out "$W/steps-qwen"
  TAIL=8 step 60 steps-8b $B validate --bench-steps --machine "$W/profile.json" --plan $P/llama8b-1gpu.json \
    --model llama-3.1-8b --batches 1,2,8,32 --context 1024 --prefill 2048 --out "$W/steps-8b"
  v qwen-chat 70 --plan $P/qwen-moe-1gpu.json --model qwen1.5-moe-a2.7b --workload $V/workloads/validate-chat.json \
    --requests 40 --rate 8
  left 500 && v six-single 70 --workload $V/workloads/validate-chat.json --plan $P/llama8b-1gpu.json \
    --model llama-3.1-8b --requests 40 --rate 8
  finish
fi
if [ "$PART" = E ]; then
  TAIL=12 step 210 profile $B profile --no-progress --model mixtral-8x7b --dtypes bf16 --skip nccl,nccl_nop2p \
    --duty 0.5 --out "$W/profile.json"
  grep -A6 '"launch"' "$W/profile.json" | head -8 | sed 's/^/  | /' | tee -a "$S" >/dev/null
  v mixtral-long 110 --plan $P/mixtral-1gpu.json --model mixtral-8x7b --workload $V/workloads/validate-long-prompt.json
  finish
fi
if [ "$PART" = F ]; then
  TAIL=4 step 120 selftest-moe env PEERPLAN_SELFTEST_ONLY=moe $B validate --self-test
  grep -iE "fail|all kernels" "$W/selftest-moe.txt" | head -8 | sed 's/^/  | /' | tee -a "$S" >/dev/null
  big=$(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits | head -1)
  for round in 1 2; do
    for bin in old new; do
      exe=$B; [ $bin = old ] && exe=$PWD/.gpu/bin/peerplan-old
      TAIL=6 step 60 "steps-qwen-$bin$round" $exe validate --bench-steps --machine $M --allow-other-host --no-measure-missing \
        --plan $P/qwen-moe-1gpu.json --model qwen1.5-moe-a2.7b --batches 1,2,4,8 --context 1024 --prefill 0 --out "$W/steps-qwen-$bin$round"
      [ "$big" -gt 100000 ] && TAIL=4 step 60 "steps-mixtral-$bin$round" $exe validate --bench-steps --machine $M \
        --allow-other-host --no-measure-missing --plan $P/mixtral-1gpu.json --model mixtral-8x7b --batches 1,2 --context 1024 \
        --prefill 0 --out "$W/steps-mixtral-$bin$round"
    done
  done
  finish
fi
