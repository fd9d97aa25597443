#!/usr/bin/env bash
# Short GPU check of the executor (each step under its own timeout, so one hang costs little):
# who else is on the GPUs, kernel self-test, decode/prefill step times of 8B (1 GPU, TP2), 70B TP2.
# usage: scripts/gpu/validate_quick.sh [MACHINE]
set -u
B=${PEERPLAN_BIN:-.gpu-exec/peerplan}
OUT=${OUT:-/tmp/peerplan-out}
M=${1:-hgx-h100x8}
mkdir -p "$OUT"
export NCCL_NVLS_ENABLE=0 PEERPLAN_HOME=$PWD
nvidia-smi --query-gpu=index,name,uuid,driver_version,utilization.gpu,memory.used --format=csv
nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv
P=docs/validation/plans
t() { local s=$1; shift; echo "+ [$s s] $*"; timeout "$s" "$@"; echo "rc=$?"; }
timeout 60 $B validate --self-test > "$OUT/selftest.txt" 2>&1; rc=$?
cat "$OUT/selftest.txt"; echo "self-test rc=$rc"
if [ $rc = 124 ]; then echo "self-test hung: stopping"; nvidia-smi; exit 1; fi
t 90 $B validate --bench-steps --plan $P/llama8b-1gpu.json --model llama-3.1-8b --machine "$M" --allow-other-host \
  --batches 1,8,64 --context 1024 --prefill 2048 --out "$OUT/steps-8b-1gpu" 2>&1 | tee "$OUT/steps.txt"
t 90 $B validate --bench-steps --plan $P/llama8b-tp2.json --model llama-3.1-8b --machine "$M" --allow-other-host \
  --batches 1,64 --context 1024 --prefill 2048 2>&1 | tee -a "$OUT/steps.txt"
t 120 $B validate --bench-steps --plan $P/llama70b-tp2.json --model llama-3.1-70b --machine "$M" --allow-other-host \
  --batches 1,64 --context 1024 --prefill 2048 2>&1 | tee -a "$OUT/steps.txt"
