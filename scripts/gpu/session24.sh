#!/usr/bin/env bash
# Session 24's prepared calls, one GPU (H100 or H200). Binary: scripts/gpu/build.sh, packed as .gpu-pack
# (docs/DEVELOPING.md). One call <= 600 s.
#   session24.sh I   (~7 min) int4 routed experts (profiler/kernels/moe_gemm_int4.cu), their first GPU run:
#     1. the MoE self-test (its int4 rows: stream with and without the k split, tiled, the eager dispatch)
#     2. Qwen1.5-MoE decode (batch 1/8/32/64, context 1024) and 2048-token prefill steps in bf16, fp8 and int4,
#        same lease, beside the shared reference's bf16 MoE step (../shared/reference/torch_moe_fp8_ref.py's
#        moe_case, Qwen only) and the FP8-expert PyTorch step (bench/moe/torch_fp8_moe_ref.py)
#     3. a profile of Qwen1.5-MoE with --dtypes bf16,int4 (its int4 grouped-GEMM rows and W4A16 dense rows),
#        int4 decode steps priced from it (batch 1-64), then Qwen1.5-MoE --weights int4 on the chat and the
#        long-prompt workloads against it
#     4. if time is left: DeepSeek-V2-Lite (session23.sh D's question: its fp8 decode priced high from Qwen's
#        rows): a profile with its own rows (bf16, fp8), fp8 steps priced from it, the fp8 chat run
#   session24.sh J   (~8 min) after I: int4 stream kinds on 16-row tiles (I measured 32-row tiles 1.3-1.5x slower)
#     1. the MoE self-test; Qwen1.5-MoE int4 and bf16 decode/prefill steps beside the shared reference's bf16 MoE step
#     2. a fresh profile (bf16,int4) of Qwen1.5-MoE and Mixtral-8x7B; Qwen1.5-MoE int4 and bf16 steps priced from it
#        (I: int4 at batch 4-64 ran 1.07-1.10x its price), its int4 chat against it
#     3. Mixtral-8x7B int4 (as its AWQ / GPTQ checkpoints; 24 GB: fits an H100, bf16 does not) decode and prefill steps
#        priced from the profile, then its chat run. (DeepSeek-V2-Lite has no int4 run: its layer-0 dense MLP's
#        k = 10944 is not a multiple of the 128-k groups the W4A16 GEMMs take.)
#   session24.sh K   (~6 min) after J: int4 experts' eager prefill-sized groups through dequantize + cuBLASLt per expert
#     (J: Mixtral-8x7B int4 2048-token prefill 242 ms on the tiled int4 kernel against 107 bf16 on cuBLASLt)
#     1. the MoE self-test (its int4 cuBLAS rows); a fresh profile (bf16,int4) of Qwen1.5-MoE and Mixtral-8x7B
#     2. Mixtral-8x7B int4 (and bf16 on an H200) and Qwen1.5-MoE int4 steps priced from it
#     3. Mixtral-8x7B int4 on the long-prompt workload (prefill-heavy: the new path), Qwen1.5-MoE int4 long prompts
#   session24.sh L   (~5 min) after K: int4 group scales loaded with the codes, and profiled cold (K: int4 decode at
#     batch 2-32 ran 1.08-1.12x its price; Mixtral-8x7B int4 long prompts missed TPOT p50 -7.7 %): the MoE self-test,
#     a fresh profile (bf16,int4) of both models, int4 steps priced from it, Mixtral-8x7B int4 long prompts and chat,
#     Qwen1.5-MoE int4 chat
#   session24.sh S   (~5 min) the int4 k-split A/B (docs/quantization.md, int4 routed experts: Mixtral's int4 down at 4-8
#     tokens ran latency-bound with k whole): the grouped int4 rows of both models and their int4 decode steps with
#     PEERPLAN_INT4_SPLIT_WARPS=1 (the default, what L timed) and 4, same lease. If 4 wins at every size, make it the
#     default (moe_gemm_int4.cu) and re-run L.
#   session24.sh D   = session23.sh D
set -u
PART=${1:?usage: session24.sh I | J | K | L | S | D}
[ "$PART" = D ] && exec bash "$(dirname "$0")/session23.sh" D
OUT_DEFAULT=/tmp/peerplan-s24
source "$(dirname "$0")/call_lib.sh"
REF=${REF:-.gpu-ref}; [ -d ../shared/reference ] && REF=../shared/reference
# The MoE self-test, its int4 rows summarized.
selftest_int4() {
  TAIL=3 step 150 selftest-moe env PEERPLAN_SELFTEST_ONLY=moe $B validate --self-test
  grep -E "int4" "$W/selftest-moe.txt" | grep -v " ok$" | head -30 | sed 's/^/  | int4 not ok: /' | tee -a "$S" >/dev/null
  grep -cE "int4.* ok$" "$W/selftest-moe.txt" | sed 's/^/  | int4 rows ok: /' | tee -a "$S" >/dev/null
}
if [ "$PART" = I ]; then
  TAIL=4 step 150 selftest-moe env PEERPLAN_SELFTEST_ONLY=moe $B validate --self-test
  grep -E "int4" "$W/selftest-moe.txt" | grep -v " ok$" | head -30 | sed 's/^/  | int4 not ok: /' | tee -a "$S" >/dev/null
  grep -cE "int4.* ok$" "$W/selftest-moe.txt" | sed 's/^/  | int4 rows ok: /' | tee -a "$S" >/dev/null
  grep -ciE "fail" "$W/selftest-moe.txt" | sed 's/^/  | lines with FAIL: /' | tee -a "$S" >/dev/null
  for w in bf16 fp8 int4; do
    TAIL=10 step 80 "steps-qwen-$w" $B validate --bench-steps --plan $P/qwen-moe-1gpu.json --model qwen1.5-moe-a2.7b \
      --weights $w --machine models/hardware/h200x2-nvlink.json --allow-other-host --no-measure-missing \
      --batches 1,8,32,64 --context 1024 --prefill 2048 --out "$W/steps-qwen-$w"
  done
  TAIL=3 step 120 torch-ref-qwen python3 -c "import sys, json; sys.path.insert(0, '$REF'); import torch_moe_fp8_ref as r
out = {'torch': r.torch.__version__, 'gpu': r.torch.cuda.get_device_name(0)}
r.moe_case('qwen1.5-moe-a2.7b', r.MOE['qwen1.5-moe-a2.7b'], out)
json.dump(out, open('$W/torch_moe_ref_qwen.json', 'w'), indent=1)"
  TAIL=3 step 90 torch-fp8-moe python3 bench/moe/torch_fp8_moe_ref.py "$W" "$REF" qwen1.5-moe-a2.7b
  TAIL=4 step 200 profile $B profile --no-progress --model qwen1.5-moe-a2.7b --dtypes bf16,int4 --skip nccl,nccl_nop2p \
    --out "$W/profile.json"
  grep -o '"dtype": *"int4"' "$W/profile.json" 2>/dev/null | wc -l | sed 's/^/  | int4 rows in the profile: /' | tee -a "$S" >/dev/null
  TAIL=12 step 60 steps-qwen-int4-priced $B validate --bench-steps --plan $P/qwen-moe-1gpu.json --model qwen1.5-moe-a2.7b \
    --weights int4 --machine "$W/profile.json" --batches 1,2,4,8,16,32,64 --context 1024 --prefill 2048 \
    --out "$W/steps-qwen-int4-priced"
  left 400 && v qwen-int4-chat 120 --plan $P/qwen-moe-1gpu.json --model qwen1.5-moe-a2.7b --weights int4 \
    --workload $V/workloads/validate-chat.json
  left 470 && v qwen-int4-long 100 --plan $P/qwen-moe-1gpu.json --model qwen1.5-moe-a2.7b --weights int4 \
    --workload $V/workloads/validate-long-prompt.json
  finish
fi
if [ "$PART" = J ]; then
  selftest_int4
  TAIL=3 step 120 torch-ref-qwen python3 -c "import sys, json; sys.path.insert(0, '$REF'); import torch_moe_fp8_ref as r
out = {'torch': r.torch.__version__, 'gpu': r.torch.cuda.get_device_name(0)}
r.moe_case('qwen1.5-moe-a2.7b', r.MOE['qwen1.5-moe-a2.7b'], out)
json.dump(out, open('$W/torch_moe_ref_qwen.json', 'w'), indent=1)"
  TAIL=4 step 240 profile $B profile --no-progress --model qwen1.5-moe-a2.7b --model mixtral-8x7b --dtypes bf16,int4 \
    --skip nccl,nccl_nop2p --out "$W/profile.json"
  for w in int4 bf16; do
    TAIL=10 step 60 "steps-qwen-$w" $B validate --bench-steps --plan $P/qwen-moe-1gpu.json --model qwen1.5-moe-a2.7b \
      --weights $w --machine "$W/profile.json" --batches 1,2,4,8,16,32,64 --context 1024 --prefill 2048 \
      --out "$W/steps-qwen-$w"
  done
  TAIL=10 step 60 steps-mixtral-int4 $B validate --bench-steps --plan $P/mixtral-1gpu.json --model mixtral-8x7b \
    --weights int4 --machine "$W/profile.json" --batches 1,2,4,8,16,32,64 --context 1024 --prefill 2048 \
    --out "$W/steps-mixtral-int4"
  nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits | awk '{exit !($1 > 120000)}' && \
    TAIL=10 step 60 steps-mixtral-bf16 $B validate --bench-steps --plan $P/mixtral-1gpu.json --model mixtral-8x7b \
    --weights bf16 --machine "$W/profile.json" --batches 1,2,4,8,16,32,64 --context 1024 --prefill 2048 \
    --out "$W/steps-mixtral-bf16"  # an H200 only: 93 GB of bf16 weights
  left 420 && v qwen-int4-chat 110 --plan $P/qwen-moe-1gpu.json --model qwen1.5-moe-a2.7b --weights int4 \
    --workload $V/workloads/validate-chat.json
  left 480 && v mixtral-int4-chat 110 --plan $P/mixtral-1gpu.json --model mixtral-8x7b --weights int4 \
    --workload $V/workloads/validate-chat.json
  finish
fi
if [ "$PART" = K ]; then
  selftest_int4
  TAIL=4 step 240 profile $B profile --no-progress --model qwen1.5-moe-a2.7b,mixtral-8x7b --dtypes bf16,int4 \
    --skip nccl,nccl_nop2p --out "$W/profile.json"
  big=$(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits | awk '{print ($1 > 120000)}')
  for w in int4 bf16; do
    [ "$w" = bf16 ] && [ "$big" != 1 ] && continue  # 93 GB of bf16 weights: an H200 only
    TAIL=10 step 60 "steps-mixtral-$w" $B validate --bench-steps --plan $P/mixtral-1gpu.json --model mixtral-8x7b \
      --weights $w --machine "$W/profile.json" --batches 1,2,4,8,16,32,64 --context 1024 --prefill 2048 \
      --out "$W/steps-mixtral-$w"
  done
  TAIL=10 step 60 steps-qwen-int4 $B validate --bench-steps --plan $P/qwen-moe-1gpu.json --model qwen1.5-moe-a2.7b \
    --weights int4 --machine "$W/profile.json" --batches 1,2,4,8,16,32,64 --context 1024 --prefill 2048 \
    --out "$W/steps-qwen-int4"
  left 430 && v mixtral-int4-long 120 --plan $P/mixtral-1gpu.json --model mixtral-8x7b --weights int4 \
    --workload $V/workloads/validate-long-prompt.json
  left 500 && v qwen-int4-long 90 --plan $P/qwen-moe-1gpu.json --model qwen1.5-moe-a2.7b --weights int4 \
    --workload $V/workloads/validate-long-prompt.json
  finish
fi
if [ "$PART" = L ]; then
  selftest_int4
  TAIL=2 step 240 profile $B profile --no-progress --model qwen1.5-moe-a2.7b,mixtral-8x7b --dtypes bf16,int4 \
    --skip nccl,nccl_nop2p --out "$W/profile.json"
  for m in mixtral:mixtral-8x7b qwen-moe:qwen1.5-moe-a2.7b; do
    TAIL=10 step 60 "steps-${m%%:*}-int4" $B validate --bench-steps --plan $P/${m%%:*}-1gpu.json --model ${m#*:} \
      --weights int4 --machine "$W/profile.json" --batches 1,2,4,8,16,32,64 --context 1024 --prefill 2048 \
      --out "$W/steps-${m%%:*}-int4"
  done
  v mixtral-int4-long 110 --plan $P/mixtral-1gpu.json --model mixtral-8x7b --weights int4 \
    --workload $V/workloads/validate-long-prompt.json
  left 330 && v mixtral-int4-chat 100 --plan $P/mixtral-1gpu.json --model mixtral-8x7b --weights int4 \
    --workload $V/workloads/validate-chat.json
  left 390 && v qwen-int4-chat 90 --plan $P/qwen-moe-1gpu.json --model qwen1.5-moe-a2.7b --weights int4 \
    --workload $V/workloads/validate-chat.json
  finish
fi
if [ "$PART" = S ]; then
  selftest_int4
  i=0
  for f in 1 4 1 4; do
    n=$((++i))
    TAIL=2 step 120 "grouped-f$f-$n" env PEERPLAN_INT4_SPLIT_WARPS=$f $B profile --only grouped_gemm --no-progress \
      --model qwen1.5-moe-a2.7b,mixtral-8x7b --dtypes int4 --max-tokens 64 --out "$W/grouped-f$f-$n.json"
    for m in mixtral:mixtral-8x7b qwen-moe:qwen1.5-moe-a2.7b; do
      TAIL=9 step 40 "steps-${m%%:*}-f$f-$n" env PEERPLAN_INT4_SPLIT_WARPS=$f $B validate --bench-steps \
        --plan $P/${m%%:*}-1gpu.json --model ${m#*:} --weights int4 --machine models/hardware/h200x2-nvlink.json \
        --allow-other-host --no-measure-missing --batches 1,2,4,8,16,32,64 --context 1024 --prefill 0 \
        --out "$W/steps-${m%%:*}-f$f-$n"
    done
    left 420 || break
  done
  finish
fi
echo "unknown part $PART" >&2; exit 2
