#!/usr/bin/env bash
# MoE decode on one GPU (issue 14): the executor's routed MoE (peerplan validate --bench-steps: CUDA
# graphs, context 1024) beside the PyTorch reference that routes top-k and runs torch._grouped_mm
# (.gpu-ref/torch_moe_fp8_ref.py), in the same call, for Qwen1.5-MoE-A2.7B and Mixtral-8x7B at
# batch 1/8/32/64 and a 2048-token prefill (also with every expert GEMM on the grouped kernel: the
# cuBLAS-per-expert dispatch's gain); then the B=1 bound: the HBM bytes the step touches (the
# compiler's count: routed experts only) over the measured HBM bandwidth (profile --only hbm). Also
# the grouped-GEMM profile rows of both models (the kernel choice's evidence, and the prefill-sized
# groups: our kernel, cuBLASLt per expert, the executor's dispatch). bench/moe/summary.py prints the
# table and the issue's two criteria as PASS/FAIL lines.
# usage: bench/moe/run.sh [STAGED_DIR (default .gpu-moe-exec)]   outputs: $OUT/summary.txt, $OUT/moe.tgz
set -u
D=${1:-.gpu-moe-exec}
B=$D/bin/peerplan
OUT=${OUT:-/tmp/peerplan-moe}
W=${MOE_W:-$OUT/w}; mkdir -p "$W"   # every output; packed into $OUT/moe.tgz after each step (the device
                                     # tool returns at most 8 files)
export NCCL_NVLS_ENABLE=0 PEERPLAN_HOME=$PWD
# bench-steps times this host's GPU 0 on the plan compiled for the machine file: the lease's own
# profile-hbm.json (written first; its meta says the executor fuses the residual add into the norm,
# machine.hpp fused_add_norm), and for the A/B at batch 1 the shipped h200x2 profile, from before
# that executor, whose plans keep the two residual-add kernels a layer.
M=$W/profile-hbm.json
M_UNFUSED=models/hardware/h200x2-nvlink.json
here=$(cd "$(dirname "$0")" && pwd)
step() { local t=$1 name=$2; shift 2; echo "+ [$name] $*"; local t0=$(date +%s)
  timeout "$t" "$@" > "$W/$name.txt" 2>&1; local rc=$?
  echo "  rc=$rc $(( $(date +%s) - t0 )) s"; tail -n "${TAIL:-12}" "$W/$name.txt" | sed 's/^/  | /'
  tar czf "$OUT/moe.tgz" -C "$W" . 2>/dev/null; }
# Essentials first (a call cut short keeps them): HBM bandwidth, both models' steps, the reference
# (it writes its JSON after each model: its MoE part comes first), then the grouped-GEMM profile.
TAIL=3 step 30 profile-hbm $B profile --only hbm --no-progress --out "$W/profile-hbm.json"
for m in qwen1.5-moe-a2.7b:$here/qwen1.5-moe-1gpu.json mixtral-8x7b:docs/validation/plans/mixtral-1gpu.json; do
  TAIL=8 step "${STEP_S:-75}" "steps-${m%%:*}" $B validate --bench-steps --plan "${m#*:}" --model "${m%%:*}" \
    --machine $M --allow-other-host --batches 1,8,32,64 --context 1024 --prefill 2048 --out "$W/steps-${m%%:*}"
done
# Batch 1 with the residual adds as kernels of their own (the executor before session 15): the fused
# norm's gain on the step. UNFUSED_AB=0 skips it.
if [ "${UNFUSED_AB:-1}" = 1 ]; then
  for m in qwen1.5-moe-a2.7b:$here/qwen1.5-moe-1gpu.json mixtral-8x7b:docs/validation/plans/mixtral-1gpu.json; do
    TAIL=4 step "${AB_S:-50}" "steps-${m%%:*}-unfused" $B validate --bench-steps --plan "${m#*:}" --model "${m%%:*}" \
      --machine $M_UNFUSED --allow-other-host --batches 1 --context 1024 --out "$W/steps-${m%%:*}-unfused"
  done
fi
# The prefill step again with every grouped GEMM on the grouped kernel (the executor before the
# cuBLAS-per-expert dispatch, PEERPLAN_MOE_CUBLAS_MIN_GFLOP=1e30): the dispatch's end-to-end gain.
# PREFILL_AB=0 skips it.
if [ "${PREFILL_AB:-1}" = 1 ]; then
  for m in qwen1.5-moe-a2.7b:$here/qwen1.5-moe-1gpu.json mixtral-8x7b:docs/validation/plans/mixtral-1gpu.json; do
    PEERPLAN_MOE_CUBLAS_MIN_GFLOP=1e30 TAIL=4 step "${AB_S:-50}" "steps-${m%%:*}-grouped" $B validate --bench-steps \
      --plan "${m#*:}" --model "${m%%:*}" --machine $M --allow-other-host --batches 1 --context 1024 --prefill 2048 \
      --out "$W/steps-${m%%:*}-grouped"
  done
fi
[ -f "$W/torch_moe_fp8_ref.json" ] || TAIL=8 step "${REF_S:-100}" torch-ref python3 .gpu-ref/torch_moe_fp8_ref.py "$W"
TAIL=3 step "${GG_S:-60}" profile-grouped $B profile --only grouped_gemm --model mixtral-8x7b --model qwen1.5-moe-a2.7b \
  --no-progress --out "$W/profile-grouped.json"
python3 "$here/summary.py" "$W" | tee "$OUT/summary.txt"
cp "$OUT/summary.txt" "$W/"; tar czf "$OUT/moe.tgz" -C "$W" .
