#!/usr/bin/env bash
# Session 35's prepared call, one GPU (any). Binary: scripts/gpu/build.sh, packed as .gpu-pack (docs/DEVELOPING.md).
#   session35.sh A   (~6 min; ROUNDS=1 for less) where the shared experts' second stream loses its time at one sequence
#     (session 34: two-stream decode priced 6.8 % short at batch 1, within 2.3 % at 4-8; one stream within 1 %). An
#     unpaced profile of Qwen1.5-MoE (this lease's prices), then decode steps of Qwen1.5-MoE at 1 / 2 / 4 / 8 sequences
#     in six settings: one or two streams (PEERPLAN_SHARED_STREAM=0/1), each whole, without the shared branch
#     (PEERPLAN_SKIP_OPS=shared.,shared_gate: the fork and join stay) and without the routed expert GEMMs
#     (PEERPLAN_SKIP_OPS=expert.: the route and combine stay). Two-stream minus one-stream without the shared branch
#     is what the fork and join cost in the graph; whole minus without-shared is what the branch adds on each.
#     Then DeepSeek-V2-Lite's six, one round. The profile records fork_join_us (extra.launch: a fork and join in a PDL
#     graph of empty kernels), printed to the summary, to set beside the steps' difference.
#   session35.sh B   (~4 min) A's Qwen1.5-MoE part again on a profile of its own (a second round, a second fork_join_us),
#     then Qwen1.5-MoE chat (400 requests, two streams) validated against that profile: a whole prediction to re-price
#     offline when the overlap model changes.
set -u
PART=${1:?usage: session35.sh A | B}
OUT_DEFAULT=/tmp/peerplan-s35
source "$(dirname "$0")/call_lib.sh"
if [ "$PART" = A ] || [ "$PART" = B ]; then
  log "nsys: $(command -v nsys || ls /usr/local/cuda*/bin/nsys 2>/dev/null | head -1 || echo none)"
  TAIL=4 step 130 profile $B profile --no-progress --model qwen1.5-moe-a2.7b --dtypes bf16 --skip nccl,nccl_nop2p \
    --out "$W/profile.json"
  python3 -c "import json, sys; print('  launch:', json.load(open(sys.argv[1]))['measurements']['extra']['launch'])" \
    "$W/profile.json" 2>&1 | tee -a "$S"
  six() {  # NAME MODEL PLAN
    for st in 1 0; do
      bench "$1-s$st" "$2" "$3" bf16 1,2,4,8 1024 PEERPLAN_SHARED_STREAM=$st
      bench "$1-s$st-noshared" "$2" "$3" bf16 1,2,4,8 1024 PEERPLAN_SHARED_STREAM=$st PEERPLAN_SKIP_OPS=shared.,shared_gate
      bench "$1-s$st-norouted" "$2" "$3" bf16 1,2,4,8 1024 PEERPLAN_SHARED_STREAM=$st PEERPLAN_SKIP_OPS=expert.
    done
  }
  [ "$PART" = B ] && { six qwen qwen1.5-moe-a2.7b qwen-moe-1gpu.json
    v qwen-chat 200 --plan $P/qwen-moe-1gpu.json --model qwen1.5-moe-a2.7b --weights bf16 \
      --workload $V/workloads/validate-chat.json --requests 400; finish; }
  for r in $(seq "${ROUNDS:-2}"); do six qwen qwen1.5-moe-a2.7b qwen-moe-1gpu.json; done
  left 470 && six dsv2 deepseek-v2-lite deepseek-v2-lite-1gpu.json
  finish
fi
echo "unknown part $PART" >&2; exit 2
