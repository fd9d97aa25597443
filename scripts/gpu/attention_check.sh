#!/usr/bin/env bash
# Issue 18 on one H200 (device tool: carry [".gpu-attention", ".gpu-ref"] or your staged dir):
#   scripts/gpu/attention_check.sh [STAGED_DIR (default .gpu)] [kernels|validate|all (default kernels)]
# kernels (~2 min): the kernel self-test (prefill by cuDNN and by the own kernel), the long-context
#   bench (STAGED_DIR/bin/cb, bench/attention/chunk_build.sh), the PyTorch SDPA reference in the
#   same lease (.gpu-ref/torch_attn_ref.py) with the >= 0.9x check per shape, and the attention
#   profile with its held-back interpolation errors (<= 3 %).
# validate (~4 min): a fresh profile of Llama-3.1-8B's shapes, then validate under the long-prompt
#   workloads (models/workloads/long-prompt-8k-32k.json, long-prompt-64k-100k.json): TTFT p50 and
#   TPOT p50 within 5 %, E2E p99 within 10 %.
# cuDNN: the binary dlopens it (profiler/gpu/cudnn_attention.hpp); here it comes with PyTorch's pip
# packages, whose lib folders are put on LD_LIBRARY_PATH (PEERPLAN_CUDNN_LIB names the library).
# Outputs go under $OUT; PASS/FAIL lines and the figures on stdout.
set -u
D=${1:-.gpu}; MODE=${2:-kernels}
OUT=${OUT:-/tmp/peerplan-attention}; mkdir -p "$OUT"
B=$PWD/$D/bin/peerplan
export NCCL_NVLS_ENABLE=0 PEERPLAN_HOME=$PWD
# The cuDNN path is opt-in until it has passed here (profiler/gpu/cudnn_attention.hpp).
export PEERPLAN_PREFILL_ATTENTION=${PEERPLAN_PREFILL_ATTENTION:-auto}
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
NV=$(python3 -c "import importlib.util as u, os; print(os.path.dirname(list(u.find_spec('nvidia.cudnn').submodule_search_locations)[0]))" 2>/dev/null)
if [ -n "$NV" ]; then
  for d in "$NV"/*/lib; do export LD_LIBRARY_PATH=$LD_LIBRARY_PATH:$d; done
  [ -f "$NV/cudnn/lib/libcudnn.so.9" ] && export PEERPLAN_CUDNN_LIB=$NV/cudnn/lib/libcudnn.so.9
fi
echo "cuDNN library: ${PEERPLAN_CUDNN_LIB:-(loader search)}"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee "$OUT/gpu.txt"
date -u +%FT%TZ | tee -a "$OUT/gpu.txt"
fail=0
verdict() { if [ "$1" = 1 ]; then echo "PASS $2"; else echo "FAIL $2"; fail=1; fi; }

if [ "$MODE" = kernels ] || [ "$MODE" = all ]; then
  timeout 90 "$B" validate --self-test > "$OUT/selftest.txt" 2>&1; rc=$?
  grep -E "prefill_attention|cuDNN" "$OUT/selftest.txt" | head -40
  n_dnn=$(grep -c "prefill_attention\[cudnn\]" "$OUT/selftest.txt")
  verdict $([ $rc = 0 ] && echo 1 || echo 0) "self-test (rc=$rc)"
  verdict $([ "$n_dnn" -gt 0 ] && echo 1 || echo 0) "prefill attention ran through cuDNN in $n_dnn self-test cases"
  if [ -x "$D/bin/cb" ]; then
    timeout 120 "$D/bin/cb" "$OUT/chunk_bench.jsonl" 2>&1 | tee "$OUT/chunk_bench.txt"
    verdict $(grep -q FAIL "$OUT/chunk_bench.txt" && echo 0 || echo 1) "long-context bench checks against the fp32 reference"
  fi
  if [ -f .gpu-ref/torch_attn_ref.py ]; then
    PYTHONUNBUFFERED=1 timeout 120 python3 .gpu-ref/torch_attn_ref.py "$OUT" 2>&1 | tail -8
    [ -f "$OUT/chunk_bench.jsonl" ] && python3 scripts/gpu/attention_vs_torch.py "$OUT"
  fi
  timeout 150 "$B" profile --only attention --model llama-3.1-8b --no-progress --out "$OUT/attention_profile.json" \
    > "$OUT/profile.txt" 2>&1; rc=$?
  grep -E "attention grid|error|Error" "$OUT/profile.txt" | head -5
  worst=$(python3 -c "import json;print(json.load(open('$OUT/attention_profile.json'))['measurements']['extra']['attention']['worst_interpolation_error'])" 2>/dev/null)
  verdict $([ $rc = 0 ] && python3 -c "import sys; sys.exit(0 if float('${worst:-1}') <= 0.03 else 1)" && echo 1 || echo 0) \
    "attention profile (rc=$rc), worst held-back interpolation error ${worst:-?} (<= 0.03)"
fi

if [ "$MODE" = validate ] || [ "$MODE" = all ]; then
  P=docs/validation/plans/llama8b-1gpu.json
  timeout 200 "$B" profile --model llama-3.1-8b --no-progress --out "$OUT/profile-8b.json" > "$OUT/profile-8b.txt" 2>&1
  for W in long-prompt-8k-32k long-prompt-64k-100k; do
    timeout 600 "$B" validate --plan $P --model llama-3.1-8b --machine "$OUT/profile-8b.json" \
      --workload models/workloads/$W.json --out "$OUT/validate-$W" > "$OUT/validate-$W.txt" 2>&1; rc=$?
    tail -25 "$OUT/validate-$W.txt"
    verdict $([ $rc = 0 ] && echo 1 || echo 0) "validate $W (rc=$rc; bounds: TTFT p50, TPOT p50 5 %, E2E p99 10 %)"
  done
fi
exit $fail
