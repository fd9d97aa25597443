#!/usr/bin/env bash
# Session 23's prepared call, one GPU (H100 or H200). Binary: scripts/gpu/build.sh, packed as .gpu-pack
# (docs/DEVELOPING.md). One call <= 600 s.
#   session23.sh F   (~8 min) FP8 routed experts (profiler/kernels/moe_gemm_fp8.cu), their first GPU run:
#     1. the MoE self-test (its FP8 rows: gemv, stream with and without the k split, cuBLASLt FP8 per expert)
#     2. Qwen1.5-MoE decode steps, bf16 and --weights fp8, same lease (batch 1/8/32/64, context 1024)
#     3. a profile of Qwen1.5-MoE with --dtypes bf16,fp8 (its fp8 grouped-GEMM rows), then Qwen1.5-MoE
#        --weights fp8 on the chat workload against it
#     4. if time is left: the FP8-expert PyTorch step (bench/moe/torch_fp8_moe_ref.py, torch._scaled_grouped_mm),
#        then Mixtral-8x7B --weights fp8 decode steps (47 GB: fits an H100)
#   session23.sh G   (~6 min) after F: the FP8 experts' eager path quantizing the rows once per call
#     1. the MoE self-test again (its cuBLAS FP8 rows now read each expert's x scales at its first row)
#     2. Qwen1.5-MoE decode + 2048-token prefill steps, bf16 and --weights fp8, same lease
#     3. a fresh profile (bf16,fp8) of Qwen1.5-MoE, then Qwen1.5-MoE --weights fp8 on the long-prompt workload
#        (eager FP8 prefills) and DeepSeek-V2-Lite --weights fp8 on the chat workload against it
#   session23.sh D   (~5 min) DeepSeek-V2-Lite --weights fp8's decode, priced 2-6.5 % high at batch 2-4 in G3 (its chat
#     TPOT p50 +14.1 %): a fresh profile of DeepSeek-V2-Lite with --dtypes bf16,fp8 (its own grouped rows, where G3
#     priced it from Qwen1.5-MoE's of the same expert shape), decode steps at batch 1-8 in bf16 and fp8 priced from
#     it (bf16 too over-priced: not FP8's), then the fp8 chat run with 200 requests (80 gave a noisy median)
#   session23.sh E   (~1 min) D's first half without a profile: DeepSeek-V2-Lite decode steps (batch 1-8, bf16 and fp8)
#     priced from G3's profile as its validation extended it (grouped rows from Qwen1.5-MoE's): is bf16 over-priced too?
#   session23.sh M   = session22.sh M (H200: Mixtral-8x7B long prompts from a paced profile)
set -u
PART=${1:?usage: session23.sh F | G | D | E | M}
[ "$PART" = M ] && exec bash "$(dirname "$0")/session22.sh" M
OUT_DEFAULT=/tmp/peerplan-s23
source "$(dirname "$0")/call_lib.sh"
# Qwen1.5-MoE decode (context 1024) and 2048-token prefill steps in bf16 and fp8, same lease.
qwen_steps() { for w in bf16 fp8; do
  TAIL=$1 step 80 "steps-qwen-$w" $B validate --bench-steps --plan $P/qwen-moe-1gpu.json --model qwen1.5-moe-a2.7b \
    --weights $w --machine models/hardware/h200x2-nvlink.json --allow-other-host --no-measure-missing \
    --batches 1,8,32,64 --context 1024 --prefill 2048 --out "$W/steps-qwen-$w"
done; }
if [ "$PART" = F ]; then
  TAIL=4 step 150 selftest-moe env PEERPLAN_SELFTEST_ONLY=moe $B validate --self-test
  grep -E "fp8" "$W/selftest-moe.txt" | head -40 | sed 's/^/  | /' | tee -a "$S" >/dev/null
  grep -ciE "fail" "$W/selftest-moe.txt" | sed 's/^/  | lines with FAIL: /' | tee -a "$S" >/dev/null
  qwen_steps 10
  TAIL=12 step 200 profile $B profile --no-progress --model qwen1.5-moe-a2.7b --dtypes bf16,fp8 --skip nccl,nccl_nop2p \
    --out "$W/profile.json"
  grep -o '"dtype": *"fp8"' "$W/profile.json" 2>/dev/null | wc -l | sed 's/^/  | fp8 rows in the profile: /' | tee -a "$S" >/dev/null
  left 420 && v qwen-fp8-chat 150 --plan $P/qwen-moe-1gpu.json --model qwen1.5-moe-a2.7b --weights fp8 \
    --workload $V/workloads/validate-chat.json
  left 470 && TAIL=4 step 90 torch-fp8-moe python3 bench/moe/torch_fp8_moe_ref.py "$W" .gpu-ref qwen1.5-moe-a2.7b
  left 500 && TAIL=10 step 80 steps-mixtral-fp8 $B validate --bench-steps --plan $P/mixtral-1gpu.json --model mixtral-8x7b \
    --weights fp8 --machine models/hardware/h200x2-nvlink.json --allow-other-host --no-measure-missing \
    --batches 1,8,32,64 --context 1024 --prefill 2048 --out "$W/steps-mixtral-fp8"
  finish
fi
if [ "$PART" = G ]; then
  TAIL=4 step 150 selftest-moe env PEERPLAN_SELFTEST_ONLY=moe $B validate --self-test
  grep -E "fp8" "$W/selftest-moe.txt" | grep -v " ok$" | head -20 | sed 's/^/  | not ok: /' | tee -a "$S" >/dev/null
  grep -cE "fp8.* ok$" "$W/selftest-moe.txt" | sed 's/^/  | fp8 rows ok: /' | tee -a "$S" >/dev/null
  grep -ciE "fail" "$W/selftest-moe.txt" | sed 's/^/  | lines with FAIL: /' | tee -a "$S" >/dev/null
  qwen_steps 7
  TAIL=4 step 200 profile $B profile --no-progress --model qwen1.5-moe-a2.7b --dtypes bf16,fp8 --skip nccl,nccl_nop2p \
    --out "$W/profile.json"
  left 400 && v qwen-fp8-long 150 --plan $P/qwen-moe-1gpu.json --model qwen1.5-moe-a2.7b --weights fp8 \
    --workload $V/workloads/validate-long-prompt.json
  left 480 && v dsv2-fp8-chat 110 --plan $P/deepseek-v2-lite-1gpu.json --model deepseek-v2-lite --weights fp8 \
    --workload $V/workloads/validate-chat.json --requests 80
  finish
fi
if [ "$PART" = D ]; then
  TAIL=4 step 200 profile $B profile --no-progress --model deepseek-v2-lite --dtypes bf16,fp8 --skip nccl,nccl_nop2p \
    --out "$W/profile.json"
  for w in bf16 fp8; do
    TAIL=12 step 80 "steps-dsv2-$w" $B validate --bench-steps --plan $P/deepseek-v2-lite-1gpu.json --model deepseek-v2-lite \
      --weights $w --machine "$W/profile.json" --batches 1,2,3,4,5,8 --context 700 --prefill 0 --out "$W/steps-dsv2-$w"
  done
  left 420 && v dsv2-fp8-chat 150 --plan $P/deepseek-v2-lite-1gpu.json --model deepseek-v2-lite --weights fp8 \
    --workload $V/workloads/validate-chat.json --requests 200
  finish
fi
if [ "$PART" = E ]; then
  zcat docs/validation/runs/2026-12-06-session23/G3/validate-dsv2-fp8-chat/machine-extended.json.gz > "$W/g3-extended.json"
  for w in bf16 fp8; do
    TAIL=12 step 60 "steps-dsv2-$w" $B validate --bench-steps --plan $P/deepseek-v2-lite-1gpu.json --model deepseek-v2-lite \
      --weights $w --machine "$W/g3-extended.json" --allow-other-host --no-measure-missing --batches 1,2,3,4,5,8 \
      --context 700 --prefill 0 --out "$W/steps-dsv2-$w"
  done
  rm -f "$W/g3-extended.json"
  finish
fi
echo "unknown part $PART" >&2; exit 2
