#!/usr/bin/env bash
# Session 12 (2026-12-04) device calls; build with scripts/gpu/build.sh, carry .gpu (or the packed
# .gpu-pack/gpu.tar.xz, see docs/DEVELOPING.md).
#   scripts/gpu/session12.sh A   (one H200, ~8 min) 1. session 11 E: does validate's in-process measurement of
#                                the shapes a profile lacks slow Qwen1.5-MoE's serving decode (2.95 vs 2.80 ms)?
#                                2. the attention study grid (quarter octaves in q_len and context, every decode
#                                batch to 16) of Llama-3.1-8B's, Qwen1.5-MoE's and DeepSeek-V2-Lite's heads, the
#                                data the 3 % grid of issue 18 is chosen from offline.
#   scripts/gpu/session12.sh B   (one H200, ~9 min) issue 23's shipped MoE models on the real trace: the profile
#                                `peerplan profile` writes by default (nothing else measured by hand), then
#                                Qwen1.5-MoE-A2.7B and DeepSeek-V2-Lite on the Azure conversation trace, each
#                                validate measuring the shapes the profile lacks in a child process (A's finding).
#   scripts/gpu/session12.sh C   (one H200, ~9 min) the grid of 6016e21 (issue 18) and issue 23's unshipped models:
#                                the default profile (its attention grid: 8B / 70B / Mixtral heads, held-back errors
#                                printed), Phi-3-mini (head_dim 96) and Llama-3.2-1B (head_dim 64) on the Azure
#                                conversation trace, validate measuring their shapes in a child; then the grid of
#                                Qwen1.5-MoE's and DeepSeek-V2-Lite's heads (MLA) with its held-back errors.
#   scripts/gpu/session12.sh D   (one H200, ~8 min) 1. issue 18's long-prompt validations of Llama-3.1-8B under the
#                                grid and prefill rule of 6016e21 (8k-32k, 64k-100k); 2. A/B in one lease: Qwen1.5-MoE
#                                long prompts validated by the binary before 5bdc09e (missing shapes timed in-process,
#                                .gpu/bin/peerplan-inproc) and by this one (in a child process).
#   scripts/gpu/session12.sh E   (one H200, ~2 min; next session) the fine prefill study (PEERPLAN_ATTENTION_GRID=
#                                fine-prefill: q_len every 8 tokens to 1024, every 32 to 2048, contexts 512-16384)
#                                of 8B / 70B / Qwen1.5-MoE / DeepSeek-V2-Lite heads: what cuDNN's prefill time does
#                                between its 128-token tile steps (docs/attention.md "The grid on the GPU").
set -u
PART=${1:-A}
OUT_DEFAULT=/tmp/peerplan-s12
source "$(dirname "$0")/call_lib.sh"
if [ "$PART" = A ]; then
  TAIL=3 step 150 profile $B profile --no-progress --model qwen1.5-moe-a2.7b --dtypes bf16 --skip nccl,nccl_nop2p --out "$W/profile.json"
  v qwen-moe-long 70 --plan $P/qwen-moe-1gpu.json --model qwen1.5-moe-a2.7b --workload $V/workloads/validate-long-prompt.json
  TAIL=16 step 70 validate-qwen-moe-long-extended $B validate --machine "$W/validate-qwen-moe-long/machine-extended.json" \
    --out "$W/validate-qwen-moe-long-extended" --plan $P/qwen-moe-1gpu.json --model qwen1.5-moe-a2.7b \
    --workload $V/workloads/validate-long-prompt.json
  TAIL=6 step 30 steps-qwen $B validate --bench-steps --plan $P/qwen-moe-1gpu.json --model qwen1.5-moe-a2.7b \
    --machine "$W/profile.json" --batches 1,2 --context 3000 --prefill 0 --out "$W/steps-qwen"
  left 420 && PEERPLAN_ATTENTION_GRID=study TAIL=2 step 150 study $B profile --no-progress --only attention \
    --model llama-3.1-8b --model qwen1.5-moe-a2.7b --model deepseek-v2-lite --samples 10 --warmup 2 --out "$W/study.json"
  finish
fi
if [ "$PART" = B ]; then
  TAIL=3 step 330 profile $B profile --no-progress --out "$W/profile.json"
  AZ="--workload $V/workloads/azure-conv.json --requests 120"
  left 400 && v qwen-moe-azure-conv 130 --plan $P/qwen-moe-1gpu.json --model qwen1.5-moe-a2.7b $AZ
  left 470 && v dsv2-azure-conv 120 --plan $P/deepseek-v2-lite-1gpu.json --model deepseek-v2-lite $AZ
  left 490 && v qwen2-7b-azure-conv 100 --plan $P/qwen2-7b-1gpu.json --model tests/data/model/qwen2-7b.json $AZ
  finish
fi
if [ "$PART" = C ]; then
  TAIL=3 step 200 profile $B profile --no-progress --out "$W/profile.json"
  grep -h "attention grid" "$W/profile.txt" | tee -a "$S"
  AZ="--workload $V/workloads/azure-conv.json --requests 120"
  mkplan phi-3-mini 32; mkplan llama-3.2-1b 16
  left 300 && v phi-3-mini-azure-conv 110 --plan "$W/phi-3-mini.plan.json" --model tests/data/model/phi-3-mini.json $AZ
  left 400 && v llama-3.2-1b-azure-conv 110 --plan "$W/llama-3.2-1b.plan.json" --model tests/data/model/llama-3.2-1b.json $AZ
  left 480 && TAIL=3 step 100 grid-moe $B profile --no-progress --only attention --model qwen1.5-moe-a2.7b \
    --model deepseek-v2-lite --out "$W/grid-moe.json"
  grep -h "attention grid" "$W/grid-moe.txt" | tee -a "$S"
  finish
fi
if [ "$PART" = D ]; then
  TAIL=3 step 120 profile $B profile --no-progress --model llama-3.1-8b --model qwen1.5-moe-a2.7b --dtypes bf16 \
    --skip nccl,nccl_nop2p --out "$W/profile.json"
  grep -h "attention grid" "$W/profile.txt" | tee -a "$S"
  v llama8b-8k-32k 110 --plan $P/llama8b-1gpu.json --model llama-3.1-8b --workload models/workloads/long-prompt-8k-32k.json
  left 250 && v llama8b-64k-100k 170 --plan $P/llama8b-1gpu.json --model llama-3.1-8b --workload models/workloads/long-prompt-64k-100k.json
  # The profile lacks 2 of Qwen's GEMM shapes (as in A): both binaries measure them before serving, the
  # old one in-process, this one in a child.
  LP="--plan $P/qwen-moe-1gpu.json --model qwen1.5-moe-a2.7b --workload $V/workloads/validate-long-prompt.json"
  left 400 && [ -x .gpu/bin/peerplan-inproc ] && TAIL=16 step 70 validate-qwen-moe-long-inproc .gpu/bin/peerplan-inproc \
    validate --machine "$W/profile.json" --out "$W/validate-qwen-moe-long-inproc" $LP
  left 470 && v qwen-moe-long-child 70 $LP
  finish
fi
if [ "$PART" = E ]; then
  PEERPLAN_ATTENTION_GRID=fine-prefill TAIL=2 step 240 fine-prefill $B profile --no-progress --only attention \
    --model llama-3.1-8b --model llama-3.1-70b --model qwen1.5-moe-a2.7b --model deepseek-v2-lite --samples 10 \
    --warmup 2 --out "$W/fine-prefill.json"
  gzip -f "$W/fine-prefill.json"
  finish
fi
