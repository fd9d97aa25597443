#!/usr/bin/env bash
# Session 26's prepared calls, one GPU. Binary: scripts/gpu/build.sh, packed as .gpu-pack (docs/DEVELOPING.md).
# One call <= 600 s.
#   session26.sh P   (~9 min, H100 or H200) the grouped pricing per path (cuBLAS rows apart from grouped ones,
#     planner/cost/grouped_gemm_cost.hpp) on the runs it was made for, from a paced profile of Mixtral-8x7B
#     (--dtypes int8,fp8 --duty 0.5): int8 steps priced from it, session 25's Mixtral int8 chat and long
#     validations and Mixtral fp8 chat (its prefill crosses the same switch); last a back-to-back profile of the
#     same rows to reprice the runs offline
#   session26.sh H   (~7 min, an H200: needs_h200) (1) the routed-expert rows of the shipped H200 profile in every
#     format the executor runs (Qwen1.5-MoE, Mixtral-8x7B, DeepSeek-V2-Lite; bf16, fp8, int8, int4: `profile --only
#     grouped_gemm`), to splice into models/hardware/h200x2-nvlink.json (scripts/splice_grouped_gemm.py --replace);
#     (2) session22.sh M: Mixtral-8x7B bf16 long prompts from a paced profile of its own (93 GB: an H200 only)
#   session26.sh G   (~5 min, H100 or H200) (1) the dense int8 GEMV (W8A16 at M <= 2, kernels/dense_gemv.hpp): the quant
#     self-test, Llama-3.1-8B decode in int8 / fp8 / bf16 and Qwen1.5-MoE in int8 / fp8 beside the shared references
#     (torch_ref.py's 8B step, torch_moe_fp8_ref.py's Qwen MoE step), same lease; (2) Mixtral-8x7B int8 prefill steps
#     from 431 to 4096 tokens priced from P's back-to-back profile (where the cuBLAS int8 curve departs from its
#     interpolation), and the grouped int8 / fp8 rows on the finer eager token grid (profiler/common/sweep.hpp)
set -u
PART=${1:?usage: session26.sh P | G | H}
OUT_DEFAULT=/tmp/peerplan-s26
source "$(dirname "$0")/call_lib.sh"
steps() {  # NAME MODEL-PLAN MODEL WEIGHTS MACHINE BATCHES PREFILL [extra]
  local name=$1 plan=$2 model=$3 w=$4 m=$5 b=$6 pf=$7; shift 7
  TAIL=10 step 70 "$name" $B validate --bench-steps --plan $P/$plan-1gpu.json --model $model --weights $w --machine "$m" \
    --batches $b --context 1024 --prefill $pf --out "$W/$name" "$@"
}
if [ "$PART" = P ]; then
  # Paced (--duty 0.5: rows at the clock short prefills run at; the simulator slows long prefill work past the
  # power onset, docs/profiler.md "Clocks"): Mixtral's cuBLAS-path rows timed back to back sat in the throttled
  # state, the suspect for the prefill over-price left after the per-path split (offline +6.8 / +16.5 %).
  TAIL=4 step 300 profile $B profile --no-progress --model mixtral-8x7b --dtypes int8,fp8 \
    --skip nccl,nccl_nop2p --duty 0.5 --out "$W/profile.json"
  grep -c '"path": *"cublas_per_expert"' "$W/profile.json" | sed 's/^/  | cuBLAS-path grouped rows: /' | tee -a "$S" >/dev/null
  steps steps-mixtral-int8-priced mixtral mixtral-8x7b int8 "$W/profile.json" 1,8,64 431
  v mixtral-int8-chat 100 --plan $P/mixtral-1gpu.json --model mixtral-8x7b --weights int8 \
    --workload $V/workloads/validate-chat.json
  left 420 && v mixtral-int8-long 100 --plan $P/mixtral-1gpu.json --model mixtral-8x7b --weights int8 \
    --workload $V/workloads/validate-long-prompt.json
  left 470 && v mixtral-fp8-chat 90 --plan $P/mixtral-1gpu.json --model mixtral-8x7b --weights fp8 \
    --workload $V/workloads/validate-chat.json
  # The same rows back to back (the default), for repricing the runs above offline (revalidate_offline.py).
  left 490 && TAIL=4 step 70 profile-b2b $B profile --no-progress --model mixtral-8x7b --dtypes int8,fp8 \
    --skip nccl,nccl_nop2p --out "$W/profile-b2b.json"
  finish
fi
if [ "$PART" = G ]; then
  REF=${REF:-.gpu-ref}; [ -d ../shared/reference ] && REF=../shared/reference
  TAIL=4 step 120 selftest-quant env PEERPLAN_SELFTEST_ONLY=quant $B validate --self-test
  grep -E "gemm_int8" "$W/selftest-quant.txt" | sed 's/^/  | /' | tee -a "$S" >/dev/null
  for w in int8 fp8 bf16; do
    steps "steps-8b-$w" llama8b llama-3.1-8b $w models/hardware/h200x2-nvlink.json 1,2,8 0 --allow-other-host --no-measure-missing
  done
  for w in int8 fp8; do
    steps "steps-qwen-$w" qwen-moe qwen1.5-moe-a2.7b $w models/hardware/h200x2-nvlink.json 1,8,32,64 0 \
      --allow-other-host --no-measure-missing
  done
  TAIL=3 step 60 torch-ref-qwen python3 -c "import sys, json; sys.path.insert(0, '$REF'); import torch_moe_fp8_ref as r
out = {'torch': r.torch.__version__, 'gpu': r.torch.cuda.get_device_name(0)}
r.moe_case('qwen1.5-moe-a2.7b', r.MOE['qwen1.5-moe-a2.7b'], out)
json.dump(out, open('$W/torch_moe_ref_qwen.json', 'w'), indent=1)"
  TAIL=6 step 150 torch-ref-8b python3 "$REF/torch_ref.py" "$W"
  gunzip -c docs/validation/runs/2026-12-06-session26/P/profile-b2b.json.gz > "$W/profile-b2b.json"
  for pf in 431 640 1024 1536 2048 2515 3072 4096; do
    left 480 || break
    TAIL=3 step 40 "prefill-mixtral-int8-$pf" $B validate --bench-steps --plan $P/mixtral-1gpu.json --model mixtral-8x7b \
      --weights int8 --machine "$W/profile-b2b.json" --allow-other-host --batches 1 --context 1024 --prefill $pf \
      --out "$W/prefill-$pf"
  done
  # The grouped rows on the finer eager grid (grouped_token_counts: 384, 768, 1536, 3072 besides the powers of two),
  # to splice into P's profile and reprice its long run offline.
  left 500 && TAIL=3 step 80 profile-grouped-fine $B profile --no-progress --only grouped_gemm --model mixtral-8x7b \
    --dtypes int8,fp8 --max-tokens 4096 --out "$W/profile-grouped-fine.json"
  finish
fi
if [ "$PART" = H ]; then
  big=$(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits | awk '{print ($1 > 120000)}')
  [ "$big" = 1 ] || { log "not an H200 (under 120 GB): the rows would not be the shipped profile's GPU"; finish; }
  TAIL=4 step 260 profile-grouped $B profile --no-progress --only grouped_gemm \
    --model qwen1.5-moe-a2.7b,mixtral-8x7b,deepseek-v2-lite --dtypes bf16,fp8,int8,int4 --out "$W/profile-grouped.json"
  left 330 && TAIL=4 step 150 profile-m $B profile --no-progress --model mixtral-8x7b --dtypes bf16 \
    --skip nccl,nccl_nop2p --duty 0.5 --out "$W/profile-m.json"
  left 460 && TAIL=16 step 95 validate-mixtral-bf16-long $B validate --machine "$W/profile-m.json" \
    --out "$W/validate-mixtral-bf16-long" --plan $P/mixtral-1gpu.json --model mixtral-8x7b \
    --workload $V/workloads/validate-long-prompt.json
  finish
fi
echo "unknown part $PART" >&2; exit 2
