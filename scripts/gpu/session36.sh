#!/usr/bin/env bash
# Session 36's prepared call, one GPU (any). Binary: scripts/gpu/build.sh, packed as .gpu-pack (docs/DEVELOPING.md).
#   session36.sh A   (~5 min) which of Qwen1.5-MoE's ops the price misses at 1 / 4 / 8 sequences, the question the
#     two-stream overlap hangs on (session 35: the GPU hides 11 us of the shared branch a layer at 1 sequence and 22 at
#     4, the model ~18 at both; re-priced offline, the routed GEMMs at 4 sequences were priced 81.5 us a layer where
#     the GPU spent 94.9, and the rest of the step 2.58 ms where it spent 2.23). An unpaced profile of Qwen1.5-MoE,
#     session35.sh A's Qwen1.5-MoE settings on it (one and two streams, each whole, without the shared branch and
#     without the routed GEMMs), every op of the median decode step timed alone at 1 / 4 / 8 sequences
#     (PEERPLAN_OP_TIMES: each op alone between CUDA events, the solo times the overlap model starts from), then Qwen1.5-MoE chat (400
#     requests, two streams) against the profile.
#   session36.sh B   (~4 min) the SM-slot overlap model's figure measured (extra.launch.gpuN.gemv_pair_progress: two
#     one-token GEMVs on two streams against one after the other; recorded beside the pricer's fitted 1.2) on a profile of
#     Qwen1.5-MoE and DeepSeek-V2-Lite, then both models' decode steps at 1 / 2 / 4 / 8 sequences on one and two
#     streams, twice, to re-price offline (validate --reprice) with the measured figure and with the fitted one.
set -u
PART=${1:?usage: session36.sh A | B}
OUT_DEFAULT=/tmp/peerplan-s36
source "$(dirname "$0")/call_lib.sh"
if [ "$PART" = A ]; then
  TAIL=4 step 130 profile $B profile --no-progress --model qwen1.5-moe-a2.7b --dtypes bf16 --skip nccl,nccl_nop2p \
    --out "$W/profile.json"
  python3 -c "import json, sys; print('  launch:', json.load(open(sys.argv[1]))['measurements']['extra']['launch'])" \
    "$W/profile.json" 2>&1 | tee -a "$S"
  for st in 1 0; do
    bench "qwen-s$st" qwen1.5-moe-a2.7b qwen-moe-1gpu.json bf16 1,2,4,8 1024 PEERPLAN_SHARED_STREAM=$st
    bench "qwen-s$st-noshared" qwen1.5-moe-a2.7b qwen-moe-1gpu.json bf16 1,2,4,8 1024 PEERPLAN_SHARED_STREAM=$st \
      PEERPLAN_SKIP_OPS=shared.,shared_gate
    bench "qwen-s$st-norouted" qwen1.5-moe-a2.7b qwen-moe-1gpu.json bf16 1,2,4,8 1024 PEERPLAN_SHARED_STREAM=$st \
      PEERPLAN_SKIP_OPS=expert.
  done
  for n in 1 4 8; do
    TAIL=6 step 90 "optimes-b$n" env PEERPLAN_OP_TIMES="$W/optimes-b$n.csv" $B validate \
      --machine "$W/profile.json" --no-measure-missing --out "$W/validate-b$n" --plan $P/qwen-moe-1gpu.json \
      --model qwen1.5-moe-a2.7b --workload $V/workloads/decode-b$n-1k.json
  done
  left 420 && v qwen-chat 170 --plan $P/qwen-moe-1gpu.json --model qwen1.5-moe-a2.7b --weights bf16 \
    --workload $V/workloads/validate-chat.json --requests 400
  finish
fi
if [ "$PART" = B ]; then
  TAIL=4 step 200 profile $B profile --no-progress --model qwen1.5-moe-a2.7b,deepseek-v2-lite --dtypes bf16 \
    --skip nccl,nccl_nop2p --out "$W/profile.json"
  python3 -c "import json, sys; print('  launch:', json.load(open(sys.argv[1]))['measurements']['extra']['launch'])" \
    "$W/profile.json" 2>&1 | tee -a "$S"
  for r in 1 2; do
    for st in 1 0; do
      bench "qwen-s$st" qwen1.5-moe-a2.7b qwen-moe-1gpu.json bf16 1,2,4,8 1024 PEERPLAN_SHARED_STREAM=$st
      bench "dsv2-s$st" deepseek-v2-lite deepseek-v2-lite-1gpu.json bf16 1,2,4,8 1024 PEERPLAN_SHARED_STREAM=$st
    done
  done
  finish
fi
echo "unknown part $PART" >&2; exit 2
