#!/usr/bin/env bash
# Session 18's prepared call, one H200 (kind nvidia-h200). Binary: scripts/gpu/build.sh, packed as .gpu-pack
# (docs/DEVELOPING.md). Each call <= 600 s. (Session 17's B and C: scripts/gpu/session17.sh, unchanged.)
#   session18.sh P   (~6 min) programmatic dependent launch (PEERPLAN_PDL=1, kernels/pdl.cuh): its self-tests
#                    (the decode GEMV, a launch chain on a stream and in a CUDA graph; MoE, norm and quantized
#                    kernels launched with it; the quantized ones last, if time is left), then decode steps with PDL off / on / off / on in one lease:
#                    Qwen1.5-MoE b=1,8 (issue 14's 1.25x bound at b=1), Llama-3.1-8B W4A16 b=1,2 (issue 15's
#                    1.3x) and bf16 b=1,8,32
#   session18.sh Q   (~6 min) can a profile timed with PDL on price PDL steps? A profile of Llama-3.1-8B and
#                    Qwen1.5-MoE with PEERPLAN_PDL=1 (its decode-sized GEMM and elementwise rows are CUDA graphs
#                    of back-to-back calls, so they take in the overlap), then with PDL on: decode steps priced
#                    beside their time and the 8B chat validation (40 requests at 8/s)
set -u
PART=${1:?usage: session18.sh P|Q}
OUT_DEFAULT=/tmp/peerplan-s18
source "$(dirname "$0")/call_lib.sh"
M=models/hardware/h200x2-nvlink.json  # topology only: bench-steps times this host's GPU 0
steps() {  # NAME PDL ARGS...: decode steps of one plan with PEERPLAN_PDL=PDL
  local name=$1 pdl=$2; shift 2
  TAIL=8 step 90 "steps-$name-pdl$pdl" env PEERPLAN_PDL=$pdl $B validate --bench-steps --machine $M --allow-other-host --no-measure-missing \
    --context 1024 --prefill 0 --out "$W/steps-$name-pdl$pdl" "$@"
}
if [ "$PART" = P ]; then
  for only in pdl moe norm; do
    TAIL=4 step 120 "selftest-$only-pdl" env PEERPLAN_PDL=1 PEERPLAN_SELFTEST_ONLY=$only $B validate --self-test
    grep -iE "fail|pdl_chain|dense_gemv" "$W/selftest-$only-pdl.txt" | head -12 | sed 's/^/  | /' | tee -a "$S" >/dev/null
  done
  for pdl in 0 1 0 1; do
    steps qwen $pdl --plan $P/qwen-moe-1gpu.json --model qwen1.5-moe-a2.7b --batches 1,8
    steps int4 $pdl --plan $P/llama8b-1gpu.json --model llama-3.1-8b --weights int4 --batches 1,2
  done
  for pdl in 0 1; do
    left 480 && steps bf16 $pdl --plan $P/llama8b-1gpu.json --model llama-3.1-8b --batches 1,8,32
  done
  left 500 && TAIL=4 step 120 selftest-quant-pdl env PEERPLAN_PDL=1 PEERPLAN_SELFTEST_ONLY=quant $B validate --self-test
  finish
fi
if [ "$PART" = Q ]; then
  export PEERPLAN_PDL=1
  TAIL=8 step 300 profile $B profile --no-progress --model llama-3.1-8b --model qwen1.5-moe-a2.7b --dtypes bf16 \
    --skip nccl,nccl_nop2p --out "$W/profile.json"
  TAIL=8 step 60 steps-qwen $B validate --bench-steps --machine "$W/profile.json" --plan $P/qwen-moe-1gpu.json \
    --model qwen1.5-moe-a2.7b --batches 1,2,4,8 --context 1024 --prefill 0 --out "$W/steps-qwen"
  TAIL=8 step 60 steps-8b $B validate --bench-steps --machine "$W/profile.json" --plan $P/llama8b-1gpu.json \
    --model llama-3.1-8b --batches 1,2,8,32 --context 1024 --prefill 2048 --out "$W/steps-8b"
  left 480 && v six-single-pdl 70 --workload $V/workloads/validate-chat.json --plan $P/llama8b-1gpu.json \
    --model llama-3.1-8b --requests 40 --rate 8
  finish
fi
