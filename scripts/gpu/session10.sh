#!/usr/bin/env bash
# One H200 (tenth session, 2026-12-04; device tool: carry [".gpu"]; build with scripts/gpu/build.sh from a clean
# checkout of the commit to measure).
#   scripts/gpu/session10.sh E  (~8 min) the decode kernel's full-wave rule made the default (trim one split of a
#                               full wave of 3+ splits over chunks >= 4096 tokens): a profile of this lease with it
#                               (the grid's held-back error), Llama-3.1-8B decode steps at 32k context with the rule
#                               and with PEERPLAN_DECODE_FULL_WAVE=keep, then the long-prompt validations it touches
#                               (8k-32k, 64k-100k), Llama-3.2-1B on the Azure trace (issue 23) and the MoE runs of
#                               session 10 A again on a second GPU.
# Outputs under $OUT (summary-E.txt and partE.tgz).
set -u
PART=${1:-E}
OUT_DEFAULT=/tmp/peerplan-s10
source "$(dirname "$0")/call_lib.sh"
TR=docs/validation/workloads/azure-conv.json
if [ "$PART" = E ]; then
  mkplan llama-3.2-1b 16
  TAIL=3 step 150 profile $B profile --no-progress --model llama-3.1-8b --model qwen1.5-moe-a2.7b --model deepseek-v2-lite \
    --dtypes bf16 --skip nccl,nccl_nop2p --out "$W/profile.json"
  grep -E "attention grid" "$W/profile.txt" | sed 's/^/  | /' | tee -a "$S" >/dev/null
  python3 scripts/attention_holdout_study.py "$W/profile.json" 2>&1 | tee -a "$S"
  M=models/hardware/h200x2-nvlink.json  # topology only: bench-steps times this host's GPU 0
  for mode in auto keep; do
    TAIL=7 step 60 "steps-8b-32k-$mode" env PEERPLAN_DECODE_FULL_WAVE=$mode $B validate --bench-steps \
      --plan $P/llama8b-1gpu.json --model llama-3.1-8b --machine $M --allow-other-host --batches 8,11,13,16,22 \
      --context 32768 --prefill 0 --out "$W/steps-8b-32k-$mode"
  done
  v llama8b-8k-32k 90 --plan $P/llama8b-1gpu.json --model llama-3.1-8b --workload models/workloads/long-prompt-8k-32k.json --requests 24
  left 300 && v llama8b-64k-100k 200 --plan $P/llama8b-1gpu.json --model llama-3.1-8b --workload models/workloads/long-prompt-64k-100k.json
  left 400 && v qwen-moe-long 70 --plan $P/qwen-moe-1gpu.json --model qwen1.5-moe-a2.7b --workload $V/workloads/validate-long-prompt.json
  left 440 && v dsv2-chat 50 --plan $P/deepseek-v2-lite-1gpu.json --model deepseek-v2-lite --workload $V/workloads/validate-chat.json --requests 80
  left 420 && v llama-3.2-1b-azure-conv 150 --plan "$W/llama-3.2-1b.plan.json" --model tests/data/model/llama-3.2-1b.json --workload $TR --requests 120
  finish
fi
echo "unknown part $PART" >&2; exit 2
