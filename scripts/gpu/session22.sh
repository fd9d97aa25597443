#!/usr/bin/env bash
# Session 22's prepared call, one GPU (H100 or H200). Binary: scripts/gpu/build.sh plus bench/quant/build.sh
# .gpu/bin/qb, packed as .gpu-pack (docs/DEVELOPING.md). One call <= 600 s.
#   session22.sh W   (~4 min) the W4A16 weights' word order (profiler/common/w4_layout.hpp): GPTQ's row-major
#     order against the tiled one (a warp's load one contiguous 512 bytes), same kernels, same lease:
#     1. the quantized kernels' self-test (every W4A16 variant in both orders, the dequantiser in both)
#     2. qb: v7 (M = 1, 2) and v5 (M = 4, 8) four GEMMs of Llama-3.1-8B and -70B over rotating weights, per order
#     3. Llama-3.1-8B W4A16 decode steps (context 1024, batch 1/2/4/8), gptq / tiled / gptq / tiled
#   session22.sh M   (~6 min, H200: Mixtral needs > 80 GB) session21.sh A's Mixtral part alone: a paced profile
#     (--duty 0.5) of Mixtral-8x7B with the MoE dispatch's own throttle mixes, its long prompts priced from it
set -u
PART=${1:?usage: session22.sh W | M}
OUT_DEFAULT=/tmp/peerplan-s22
source "$(dirname "$0")/call_lib.sh"
if [ "$PART" = W ]; then
  TAIL=4 step 120 selftest-quant env PEERPLAN_SELFTEST_ONLY=quant $B validate --self-test
  grep -ciE "pass" "$W/selftest-quant.txt" | sed 's/^/  | passing lines: /' | tee -a "$S" >/dev/null
  grep -iE "fail" "$W/selftest-quant.txt" | head -12 | sed 's/^/  | /' | tee -a "$S" >/dev/null
  for l in gptq tiled; do
    TAIL=3 step 75 "qb-$l" env PEERPLAN_W4_LAYOUT=$l QB_W4_ONLY=1 QB_W4_VARIANTS=7 .gpu/bin/qb "$W/qb-$l"
    grep -E "four GEMMs" "$W/qb-$l.txt" | sed "s/^/  | $l /" | tee -a "$S" >/dev/null
  done
  for l in gptq tiled gptq tiled; do
    TAIL=8 step 50 "steps-int4-$l" env PEERPLAN_W4_LAYOUT=$l $B validate --bench-steps --plan $P/llama8b-1gpu.json \
      --model llama-3.1-8b --weights int4 --machine models/hardware/h200x2-nvlink.json --allow-other-host \
      --no-measure-missing --batches 1,2,4,8 --context 1024 --prefill 0 --out "$W/steps-int4-$l-$SECONDS"
  done
  finish
fi
if [ "$PART" = M ]; then
  big=$(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits | awk '{print ($1 > 120000)}')
  [ "$big" = 1 ] || { log "Mixtral-8x7B bf16 needs an H200 (run with needs_h200): nothing done"; finish; }
  TAIL=26 step 270 profile $B profile --no-progress --model mixtral-8x7b --dtypes bf16 --skip nccl,nccl_nop2p \
    --duty 0.5 --out "$W/profile.json"
  v mixtral-long 110 --plan $P/mixtral-1gpu.json --model mixtral-8x7b --workload $V/workloads/validate-long-prompt.json
  finish
fi
echo "unknown part $PART" >&2; exit 2
