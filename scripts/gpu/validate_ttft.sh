#!/usr/bin/env bash
# TTFT diagnosis on the GPU host: the same short validation with and without the start-up warm-up
# of every GEMM shape (--cold-start) and with CUDA's eager module loading, each writing its
# per-iteration records (iterations.json). Results: $OUT/ttft.tar, console in $OUT/ttft.txt.
# usage: scripts/gpu/validate_ttft.sh [REQUESTS] [RATE] [PLAN] [MODEL]
set -u
B=${PEERPLAN_BIN:-.gpu6/bin/peerplan}
OUT=${OUT:-/tmp/peerplan-out}
N=${1:-40}
RATE=${2:-8}
PLAN=${3:-docs/validation/plans/llama8b-1gpu.json}
MODEL=${4:-llama-3.1-8b}
M=${PROFILE:-models/hardware/h200x2-nvlink.json}
W=docs/validation/workloads/validate-chat.json
mkdir -p "$OUT"
export NCCL_NVLS_ENABLE=0 PEERPLAN_HOME=$PWD
export LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}:/usr/local/cuda/lib64:$PWD/.gpu6/lib
R=/tmp/ttft; mkdir -p $R
v() { local name=$1; shift; echo "+ $name: $*"
  timeout 120 "$@" $B validate --workload $W --machine $M --allow-other-host --requests "$N" --rate "$RATE" \
    --plan "$PLAN" --model "$MODEL" --out "$R/$name" ${EXTRA:-} > "$R/$name.txt" 2>&1; echo "rc=$?" >> "$R/$name.txt"
  cat "$R/$name.txt"; }
{
  nvidia-smi --query-gpu=index,name,driver_version,clocks.sm,clocks.max.sm --format=csv
  EXTRA=--cold-start v cold env
  v warm env
  v warm-eager env CUDA_MODULE_LOADING=EAGER
  EXTRA=--cold-start v cold-eager env CUDA_MODULE_LOADING=EAGER
} 2>&1 | tee "$OUT/ttft.txt"
tar cf "$OUT/ttft.tar" -C $R .
