#!/usr/bin/env bash
# Prepared at the end of session 10 (2026-12-04) for the next GPU; device tool: carry [".gpu"] (build with
# scripts/gpu/build.sh from a clean checkout of the commit to measure; .gpu-ref = ../shared/reference copied).
#   scripts/gpu/session11.sh A   (one H200, ~8 min) 1. is the lease-to-lease spread of decode pricing the
#                                profile's (session 10: 8B decode priced 3.6 % short, session 8: 5 % long, the
#                                executor's steps the same)? three GEMM-only profiles of Llama-3.1-8B back to
#                                back, their decode-size rows side by side, and the 8B step at batch 1/8 between
#                                them; 2. the MoE pricing of f244889 on the GPU: Qwen1.5-MoE long, DeepSeek-V2-Lite
#                                chat (re-predicted offline -1.6 / -0.3 % TPOT), Mixtral long; 3. 8B prefill steps of
#                                2048-4096 tokens (4085-token prefills ran 7 % under their price in serving).
#   scripts/gpu/session11.sh X   (nvidia-h200-x2, ~9 min) the two-GPU MoE runs under f244889 (Mixtral TP2 was
#                                +9.8 % TPOT, re-predicted +0.5 %) and DeepSeek-V2-Lite TP2 once more under
#                                `mpirun -np 2 validate --mpi` (one process per GPU, as engines run): its prefill
#                                ran 1.14-1.19x the price single-process, where one thread enqueues both GPUs.
#   scripts/gpu/session11.sh P   (nvidia-h200-x2, ~6 min) a fresh profile to ship as models/hardware/h200x2-nvlink.json
#                                (the shipped one is of 2026-11-30: 76 attention rows, no elementwise rows, grouped rows
#                                of one routing per token count; session 10's X profile had 7152 / 336 / 514 but only
#                                the MoE models): the default models plus Qwen1.5-MoE and DeepSeek-V2-Lite. Ship it with
#                                the goldens re-recorded and the tests' figures checked (tests load this file).
#   scripts/gpu/session11.sh B   (one H200, ~7 min) W4A16 v7 (dp4a) self-test, qb v5 vs v7, 8B W4A16 steps and
#                                chat validation on a fresh profile, Qwen1.5-MoE decode steps beside their price.
#   scripts/gpu/session11.sh C   (one H200, ~8 min) decode priced at the effective context (decode_split.hpp):
#                                8B 8k-32k / 64k-100k, Qwen long, 8B Azure; Qwen steps in a serving-sized engine.
#   scripts/gpu/session11.sh D   (one H200, ~6 min) Qwen1.5-MoE long, DeepSeek-V2-Lite chat, Mixtral long again.
#   scripts/gpu/session11.sh E   (one H200, ~5 min; next session) Qwen serving with and without validate's
#                                in-process measurement of missing shapes before it.
#   scripts/gpu/session11.sh F   (one H200, ~1 min) the SM clock beside Qwen's bench and serving (no profile).
#   scripts/gpu/session11.sh Y   (x2, ~3 min) X cut to what was left: Mixtral TP2 long, DeepSeek TP2 under MPI.
# Then scripts/gpu/x2_moe_long.sh long (70B TP2 long prompts) if an x2 call is left.
set -u
PART=${1:-A}
OUT_DEFAULT=/tmp/peerplan-s11
source "$(dirname "$0")/call_lib.sh"
M=models/hardware/h200x2-nvlink.json  # topology only: bench-steps times this host's GPU 0
# DeepSeek-V2-Lite TP2 chat under `mpirun -np 2 validate --mpi` (one process per GPU, as engines run),
# priced from this call's profile (X, Y).
dsv2_tp2_mpi() {
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  TAIL=16 step 90 validate-dsv2-tp2-chat-mpi mpirun --allow-run-as-root --bind-to none -np 2 \
    -x NCCL_NVLS_ENABLE -x PEERPLAN_HOME -x LD_LIBRARY_PATH $B validate --mpi --machine "$W/profile.json" \
    --plan $P/deepseek-v2-lite-tp2.json --model deepseek-v2-lite --workload $V/workloads/validate-chat.json --requests 60 \
    --out "$W/validate-dsv2-tp2-chat-mpi"
}
if [ "$PART" = A ]; then
  for i in 1 2 3; do
    TAIL=1 step 60 "gemm-$i" $B profile --no-progress --only gemm --model llama-3.1-8b --dtypes bf16 --out "$W/gemm-$i.json"
    TAIL=4 step 30 "steps-8b-$i" $B validate --bench-steps --plan $P/llama8b-1gpu.json --model llama-3.1-8b \
      --machine $M --allow-other-host --batches 1,8 --context 1024 --prefill 0 --out "$W/steps-8b-$i"
  done
  python3 - "$W"/gemm-1.json "$W"/gemm-2.json "$W"/gemm-3.json <<'PY' 2>&1 | tee -a "$S"
import json, sys
rows = [{(g["m"], g["n"], g["k"]): g["median_us"] for g in json.load(open(p))["measurements"]["gemms"]} for p in sys.argv[1:]]
for n, k in ((6144, 4096), (4096, 4096), (28672, 4096), (4096, 14336), (128256, 4096)):
    for m in (1, 8, 64):
        v = [r.get((m, n, k)) for r in rows]
        if all(v):
            print(f"m={m:3d} n={n:6d} k={k:5d}: " + " ".join(f"{x:7.1f}" for x in v) + f" us (spread {100 * (max(v) / min(v) - 1):.1f} %)")
PY
  # 3. 8B prefill of 2048..4096 tokens: serving ran 4085-token prefills in 91-97 ms, priced 102.4 from rows at
  #    M = 2048 (783 TFLOP/s for gate_up) and 4096 (690): is the M = 4096 row or the interpolation off?
  for T in 2048 3072 4085 4096; do
    TAIL=2 step 30 "prefill-8b-$T" $B validate --bench-steps --plan $P/llama8b-1gpu.json --model llama-3.1-8b \
      --machine $M --allow-other-host --batches 1 --context 1024 --prefill $T --out "$W/prefill-8b-$T"
  done
  TAIL=3 step 200 profile $B profile --no-progress --model qwen1.5-moe-a2.7b --model deepseek-v2-lite --model mixtral-8x7b \
    --dtypes bf16 --skip nccl,nccl_nop2p --out "$W/profile.json"
  grep -E "attention grid" "$W/profile.txt" | sed 's/^/  | /' | tee -a "$S" >/dev/null  # 65213f7: 8 wave boundaries
  python3 scripts/attention_holdout_study.py "$W/profile.json" 2>&1 | tee -a "$S"
  v qwen-moe-long 70 --plan $P/qwen-moe-1gpu.json --model qwen1.5-moe-a2.7b --workload $V/workloads/validate-long-prompt.json
  v dsv2-chat 50 --plan $P/deepseek-v2-lite-1gpu.json --model deepseek-v2-lite --workload $V/workloads/validate-chat.json --requests 80
  left 480 && v mixtral-long 80 --plan $P/mixtral-1gpu.json --model mixtral-8x7b --workload $V/workloads/validate-long-prompt.json
  finish
fi
if [ "$PART" = X ]; then
  LP=$V/workloads/validate-long-prompt.json
  TAIL=4 step 240 profile $B profile --no-progress --model mixtral-8x7b --model deepseek-v2-lite --dtypes bf16 --out "$W/profile.json"
  v mixtral-tp2-long 80 --plan $P/mixtral-tp2.json --model mixtral-8x7b --workload $LP --requests 40
  v mixtral-ep2-long 90 --plan $P/mixtral-ep2.json --model mixtral-8x7b --workload $LP --requests 40
  left 480 && dsv2_tp2_mpi
  finish
fi
if [ "$PART" = P ]; then
  TAIL=6 step 560 profile $B profile --no-progress --name h200x2-nvlink --model llama-3.1-8b --model llama-3.1-70b \
    --model mixtral-8x7b --model qwen1.5-moe-a2.7b --model deepseek-v2-lite --out "$W/h200x2-nvlink.json"
  finish
fi
if [ "$PART" = B ]; then
  # W4A16 v7 (x in int8, dp4a) on the GPU: its self-test, qb's v5 vs v7 at M = 1..64 over rotating weights,
  # a profile timing what the executor now runs, the 8B W4A16 steps (priced beside) and its chat validation;
  # and Qwen1.5-MoE's decode steps priced beside (serving ran them 4.6 % over their price in A).
  TAIL=14 step 90 selftest-quant env PEERPLAN_SELFTEST_ONLY=quant $B validate --self-test
  grep -E "_v7|FAIL" "$W/selftest-quant.txt" | sed 's/^/  | /' | tee -a "$S" >/dev/null
  TAIL=3 step 150 qbench env QB_W4_ONLY=1 QB_W4_VARIANTS=5,7 .gpu/bin/qb "$W/qb"
  grep -E "four GEMMs" "$W/qbench.txt" | grep -E "M=(1|2|4|8) " | sed 's/^/  | /' | tee -a "$S" >/dev/null
  TAIL=3 step 200 profile $B profile --no-progress --model llama-3.1-8b --model qwen1.5-moe-a2.7b --dtypes bf16,int4 \
    --skip nccl,nccl_nop2p --out "$W/profile.json"
  TAIL=9 step 60 steps-int4 $B validate --bench-steps --plan $P/llama8b-1gpu.json --model llama-3.1-8b --weights int4 \
    --machine "$W/profile.json" --batches 1,2,4,8,32,64 --context 1024 --prefill 0 --out "$W/steps-int4"
  TAIL=5 step 40 steps-bf16 $B validate --bench-steps --plan $P/llama8b-1gpu.json --model llama-3.1-8b \
    --machine "$W/profile.json" --batches 1,8,32 --context 1024 --prefill 2048 --out "$W/steps-bf16"
  TAIL=6 step 40 steps-qwen $B validate --bench-steps --plan $P/qwen-moe-1gpu.json --model qwen1.5-moe-a2.7b \
    --machine "$W/profile.json" --batches 1,2,3,4 --context 3000 --prefill 0 --out "$W/steps-qwen"
  v llama8b-int4 80 --plan $P/llama8b-1gpu.json --model llama-3.1-8b --weights int4 --workload $V/workloads/validate-chat.json --requests 80
  finish
fi
if [ "$PART" = C ]; then
  # Decode attention priced at the effective context of unequal / padded batches (decode_split.hpp) on the
  # GPU: 8B long prompts (session 10 E: padded batches 1.09-1.15 of their price), Qwen long and 8B Azure as
  # controls; and is Qwen's decode slower in serving (1.046) than benched (0.99-1.02) because of the
  # engine's size? The same steps with an engine sized for 8192 batched tokens (--prefill 8192).
  TAIL=3 step 150 profile $B profile --no-progress --model llama-3.1-8b --model qwen1.5-moe-a2.7b --dtypes bf16 \
    --skip nccl,nccl_nop2p --out "$W/profile.json"
  TAIL=6 step 30 steps-qwen $B validate --bench-steps --plan $P/qwen-moe-1gpu.json --model qwen1.5-moe-a2.7b \
    --machine "$W/profile.json" --batches 1,2 --context 3000 --prefill 0 --out "$W/steps-qwen"
  TAIL=6 step 30 steps-qwen-big $B validate --bench-steps --plan $P/qwen-moe-1gpu.json --model qwen1.5-moe-a2.7b \
    --machine "$W/profile.json" --batches 1,2 --context 3000 --prefill 8192 --out "$W/steps-qwen-big"
  v llama8b-8k-32k 110 --plan $P/llama8b-1gpu.json --model llama-3.1-8b --workload models/workloads/long-prompt-8k-32k.json
  v qwen-moe-long 70 --plan $P/qwen-moe-1gpu.json --model qwen1.5-moe-a2.7b --workload $V/workloads/validate-long-prompt.json
  left 380 && v llama8b-64k-100k 170 --plan $P/llama8b-1gpu.json --model llama-3.1-8b --workload models/workloads/long-prompt-64k-100k.json
  left 480 && v llama8b-azure-conv 90 --plan $P/llama8b-1gpu.json --model llama-3.1-8b --workload $V/workloads/azure-conv.json --requests 120
  finish
fi
if [ "$PART" = D ]; then
  # The single-GPU MoE validations of issue 14 once more, priced with decode_split.hpp, in a fresh lease.
  TAIL=3 step 200 profile $B profile --no-progress --model qwen1.5-moe-a2.7b --model deepseek-v2-lite --model mixtral-8x7b \
    --dtypes bf16 --skip nccl,nccl_nop2p --out "$W/profile.json"
  v qwen-moe-long 70 --plan $P/qwen-moe-1gpu.json --model qwen1.5-moe-a2.7b --workload $V/workloads/validate-long-prompt.json
  v dsv2-chat 50 --plan $P/deepseek-v2-lite-1gpu.json --model deepseek-v2-lite --workload $V/workloads/validate-chat.json --requests 80
  left 480 && v mixtral-long 80 --plan $P/mixtral-1gpu.json --model mixtral-8x7b --workload $V/workloads/validate-long-prompt.json
  finish
fi
if [ "$PART" = Y ]; then
  # X cut to the ~300 s of device time session 11 had left when the x2 machine came: Mixtral TP2 long
  # (session 10: TPOT +9.8 %, re-predicted +0.5 % after f244889), then DeepSeek-V2-Lite TP2 under mpirun.
  TAIL=4 step 170 profile $B profile --no-progress --model mixtral-8x7b --dtypes bf16 --skip nccl_nop2p --out "$W/profile.json"
  v mixtral-tp2-long 80 --plan $P/mixtral-tp2.json --model mixtral-8x7b --workload $V/workloads/validate-long-prompt.json --requests 40
  left 200 && dsv2_tp2_mpi
  finish
fi
if [ "$PART" = E ]; then
  # Prepared for the next session: serving ran Qwen1.5-MoE's batch-1 decode at 2.95 ms in every run whose
  # validate first measured the shapes its profile lacked, in the same process (A, C, D; session 8 D, E;
  # session 10 A, E), and at 2.80 ms in the one run that measured none (F), while the step bench took 2.77-2.78
  # in all and the clock held 1980 MHz (F). Same lease: validate measuring 2 missing shapes in-process, then
  # validate again on its machine-extended.json (nothing missing, nothing measured): decode GPU times compared.
  TAIL=3 step 150 profile $B profile --no-progress --model qwen1.5-moe-a2.7b --dtypes bf16 --skip nccl,nccl_nop2p --out "$W/profile.json"
  v qwen-moe-long 70 --plan $P/qwen-moe-1gpu.json --model qwen1.5-moe-a2.7b --workload $V/workloads/validate-long-prompt.json
  TAIL=16 step 70 validate-qwen-moe-long-extended $B validate --machine "$W/validate-qwen-moe-long/machine-extended.json" \
    --out "$W/validate-qwen-moe-long-extended" --plan $P/qwen-moe-1gpu.json --model qwen1.5-moe-a2.7b \
    --workload $V/workloads/validate-long-prompt.json
  TAIL=6 step 30 steps-qwen $B validate --bench-steps --plan $P/qwen-moe-1gpu.json --model qwen1.5-moe-a2.7b \
    --machine "$W/profile.json" --batches 1,2 --context 3000 --prefill 0 --out "$W/steps-qwen"
  finish
fi
if [ "$PART" = F ]; then
  # E without its profile (the ~250 s session 11 had left): clocks only, so the shipped profile prices (the
  # predictions are not the point; the GPU times and the SM clock of bench vs serving are).
  nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_throttle_reasons.active \
    --format=csv -lms 100 > "$W/clocks.csv" 2>&1 & SMI=$!
  TAIL=6 step 30 steps-qwen $B validate --bench-steps --plan $P/qwen-moe-1gpu.json --model qwen1.5-moe-a2.7b \
    --machine $M --allow-other-host --batches 1,2 --context 3000 --prefill 0 --out "$W/steps-qwen"
  TAIL=16 step 70 validate-qwen-moe-long $B validate --machine $M --allow-other-host --out "$W/validate-qwen-moe-long" \
    --plan $P/qwen-moe-1gpu.json --model qwen1.5-moe-a2.7b --workload $V/workloads/validate-long-prompt.json
  TAIL=6 step 30 steps-qwen-after $B validate --bench-steps --plan $P/qwen-moe-1gpu.json --model qwen1.5-moe-a2.7b \
    --machine $M --allow-other-host --batches 1,2 --context 3000 --prefill 0 --out "$W/steps-qwen-after"
  kill $SMI 2>/dev/null
  finish
fi
echo "unknown part $PART (A, B, C, D, E, F, X, Y or P)" >&2; exit 2
