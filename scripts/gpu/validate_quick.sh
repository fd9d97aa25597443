#!/usr/bin/env bash
# One short GPU session for the executor, each step under its own timeout (a hang costs little)
# and each validation appended to $OUT/runs.tar as soon as it ends (the device tool returns at
# most 8 files). Order: self-test, validations, step benchmarks.
# usage: scripts/gpu/validate_quick.sh [REQUESTS] [RATE]
set -u
B=${PEERPLAN_BIN:-.gpu-exec/peerplan}
OUT=${OUT:-/tmp/peerplan-out}
N=${1:-40}
RATE=${2:-8}
M=models/hardware/h200x2-nvlink.json
mkdir -p "$OUT"
export NCCL_NVLS_ENABLE=0 PEERPLAN_HOME=$PWD
nvidia-smi --query-gpu=index,name,uuid,driver_version,utilization.gpu,memory.used --format=csv
P=docs/validation/plans
W=docs/validation/workloads/validate-chat.json
timeout 40 $B validate --self-test > "$OUT/selftest.txt" 2>&1; rc=$?
cat "$OUT/selftest.txt"; echo "self-test rc=$rc"
if [ $rc = 124 ]; then echo "self-test hung: stopping"; exit 1; fi
R=/tmp/runs; mkdir -p $R
v() { local name=$1; shift; echo "+ validate $name $*"
  timeout 60 $B validate --workload $W --machine $M --allow-other-host --requests "$N" --rate "$RATE" --out "$R/$name" "$@" \
    > "$R/$name.txt" 2>&1; echo "rc=$?" >> "$R/$name.txt"; cat "$R/$name.txt"
  tar rf "$OUT/runs.tar" -C $R "$name.txt" $( [ -d "$R/$name" ] && echo "$name" ); }
v single    --plan $P/llama8b-1gpu.json --model llama-3.1-8b
v tp2       --plan $P/llama8b-tp2.json  --model llama-3.1-8b
s() { echo "+ steps $*"; timeout "$@" 2>&1 | tee -a "$OUT/steps.txt"; }
s 50 $B validate --bench-steps --plan $P/llama8b-1gpu.json --model llama-3.1-8b --machine $M --allow-other-host \
  --batches 1,64 --context 1024 --prefill 2048
v pp2       --plan $P/llama8b-pp2.json  --model llama-3.1-8b
v ep2       --plan $P/mixtral-ep2.json  --model mixtral-8x7b
v tp2-nop2p --plan $P/llama8b-tp2.json  --model llama-3.1-8b --p2p off
v pp2-nop2p --plan $P/llama8b-pp2.json  --model llama-3.1-8b --p2p off
s 70 $B validate --bench-steps --plan $P/llama70b-tp2.json --model llama-3.1-70b --machine $M --allow-other-host \
  --batches 1,64 --context 1024 --prefill 2048
s 40 $B validate --bench-steps --plan $P/llama8b-tp2.json --model llama-3.1-8b --machine $M --allow-other-host \
  --batches 1,64 --context 1024 --prefill 0
