#!/usr/bin/env bash
# Issue 15 on one GPU (H200), one device call, < 4 minutes: the quantized kernels' self-tests, the
# quantized-GEMM bench and the PyTorch FP8 reference in the same lease, then (when the staged
# binary has --weights) the executor's decode steps with FP8 / W4A16 weights and an FP8 KV cache.
# Stage first (build machine): scripts/gpu/build.sh build-gpu-quant-exec && cp -r .gpu .gpu-quant-exec
#   or by hand: .gpu-quant-exec/bin/{peerplan,qb} (bench/quant/build.sh .gpu-quant-exec/bin/qb)
# usage (GPU host, repo root; carry .gpu-quant-exec and .gpu-ref): scripts/gpu/quant_check.sh [DIR]
# Writes under $OUT: env.txt, selftest.txt, qbench.json/.txt, torch_moe_fp8_ref.json/.txt, steps.txt.
set -u
D=${1:-.gpu}
B=$D/bin/peerplan
OUT=${OUT:-/tmp/quant-out}
mkdir -p "$OUT"
export NCCL_NVLS_ENABLE=0 PEERPLAN_HOME=$PWD
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
[ -d "$D/lib" ] && ldd "$B" | grep -q 'not found' && export LD_LIBRARY_PATH=$LD_LIBRARY_PATH:$PWD/$D/lib
{ date -u +%FT%TZ; nvidia-smi --query-gpu=index,name,driver_version,memory.total,clocks.max.sm,clocks.max.mem --format=csv;
  nvcc --version 2>/dev/null | tail -1; python3 -c 'import torch; print("torch", torch.__version__, torch.version.cuda)' 2>&1; } \
  | tee "$OUT/env.txt"

echo "== self-test (all executor kernels; issue 15's rows: gemm_*, *_fp8kv)"
timeout 90 $B validate --self-test > "$OUT/selftest.txt" 2>&1; rc=$?
grep -E "gemm_|fp8kv|FAIL|error" "$OUT/selftest.txt"; tail -3 "$OUT/selftest.txt"
[ $rc = 0 ] && echo "PASS self-test" || echo "FAIL self-test rc=$rc"

echo "== qbench (decode GEMM stacks, W4A16 vs bytes/BW)"
if [ -x "$D/bin/qb" ]; then
  timeout 100 "$D/bin/qb" "$OUT" > "$OUT/qbench.txt" 2>&1; rc=$?
  cat "$OUT/qbench.txt"; [ $rc = 0 ] && echo "PASS qbench ran" || echo "FAIL qbench rc=$rc"
else echo "SKIP qbench: $D/bin/qb not staged"; fi

echo "== PyTorch reference (torch._scaled_mm per-tensor, same lease)"
timeout 110 python3 .gpu-ref/torch_moe_fp8_ref.py "$OUT" > "$OUT/torch_moe_fp8_ref.txt" 2>&1; rc=$?
cat "$OUT/torch_moe_fp8_ref.txt"; [ $rc = 0 ] && echo "PASS reference ran" || echo "FAIL reference rc=$rc"

if [ $SECONDS -gt 190 ]; then echo "SKIP executor steps: ${SECONDS}s used (stay under 4 minutes)"
elif $B validate --help 2>&1 | grep -q -- '--weights'; then
  echo "== executor decode steps, Llama-3.1-8B on one GPU: bf16 / fp8 / int4 weights, fp8 KV"
  P=docs/validation/plans/llama8b-1gpu.json M=models/hardware/h200x2-nvlink.json
  for w in "--weights fp8" "--weights int4" "--weights fp8 --kv-dtype fp8"; do
    echo "+ steps $w" | tee -a "$OUT/steps.txt"
    [ $SECONDS -gt 220 ] && { echo "SKIP (${SECONDS}s used)" >> "$OUT/steps.txt"; break; }
    timeout 30 $B validate --bench-steps --plan $P --model llama-3.1-8b --machine $M --allow-other-host \
      --batches 1,64 --context 1024 --prefill 2048 $w >> "$OUT/steps.txt" 2>&1; echo "rc=$?" >> "$OUT/steps.txt"
  done
  cat "$OUT/steps.txt"
else echo "SKIP executor steps: this binary has no --weights (quant-planner's options not in it)"; fi
