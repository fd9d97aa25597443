#!/usr/bin/env bash
# Runs on the 2 x H200 device machine (see .library/device): kernel self-test, step benchmarks,
# then `peerplan validate` for the issue's configurations. Binary: .gpu-exec/peerplan (carried).
# usage: scripts/gpu/validate_run.sh [steps|validate|all] [REQUESTS] [RATE]   (RATE: req/s, default the workload's)
set -u
what=${1:-all}
requests=${2:-120}
rate=${3:-}
B=${PEERPLAN_BIN:-.gpu-exec/peerplan}
OUT=${OUT:-/tmp/peerplan-out}
mkdir -p "$OUT"
export NCCL_NVLS_ENABLE=0            # never NVLink multicast on a shared host
export PEERPLAN_HOME=$PWD
export LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}:/usr/local/cuda/lib64:/usr/local/cuda/lib:$PWD/$(dirname "$B")/../lib
# cuBLASLt / NCCL may live only in the Python wheels of the image
for d in /opt/torch/.venv/lib/python3*/site-packages/nvidia/*/lib; do [ -d "$d" ] && LD_LIBRARY_PATH=$LD_LIBRARY_PATH:$d; done
ldd "$B" | grep -i "not found" && echo "missing libraries above"
nvidia-smi --query-gpu=index,name,uuid,driver_version,memory.total --format=csv > "$OUT/gpus.csv" 2>&1
cat "$OUT/gpus.csv"
# The prediction needs a profile of THIS host: $PROFILE if given, else measure one now (the
# shipped models/hardware/h200x2-nvlink.json may come from another lease of the machine).
PROFILE=${PROFILE:-}
if [ -z "$PROFILE" ]; then
  timeout 200 $B profile --model llama-3.1-8b --model mixtral-8x7b --no-progress --out "$OUT/profile.json" \
    > "$OUT/profile.log" 2>&1 || echo "profile failed: $(tail -5 "$OUT/profile.log")"
  if [ -f "$OUT/profile.json" ]; then PROFILE=$OUT/profile.json; elif [ -f models/hardware/h200x2-nvlink.json ]; then PROFILE=models/hardware/h200x2-nvlink.json; else PROFILE=models/hardware/hgx-h100x8.json; fi
fi
echo "profile: $PROFILE"
run() { echo "+ $*"; "$@"; }
if [ "$what" = steps ] || [ "$what" = all ]; then
  run $B validate --self-test 2>&1 | tee "$OUT/selftest.txt"
  P=docs/validation/plans
  run $B validate --bench-steps --plan $P/llama8b-1gpu.json --model llama-3.1-8b --machine "$PROFILE" \
      --allow-other-host --batches 1,8,64 --context 1024 --prefill 2048 2>&1 | tee "$OUT/steps.txt"
  run $B validate --bench-steps --plan $P/llama8b-tp2.json --model llama-3.1-8b --machine "$PROFILE" \
      --allow-other-host --batches 1,64 --context 1024 --prefill 2048 2>&1 | tee -a "$OUT/steps.txt"
  run $B validate --bench-steps --plan $P/llama70b-tp2.json --model llama-3.1-70b --machine "$PROFILE" \
      --allow-other-host --batches 1,64 --context 1024 --prefill 2048 2>&1 | tee -a "$OUT/steps.txt"
fi
if [ "$what" = validate ] || [ "$what" = all ]; then
  P=docs/validation/plans
  W=docs/validation/workloads/validate-chat.json
  R=/tmp/peerplan-runs; mkdir -p $R   # the device tool returns at most 8 files: runs go into one tarball
  v() { name=$1; shift; run timeout ${VALIDATE_TIMEOUT:-120} $B validate --workload $W --machine "$PROFILE" --allow-other-host --requests "$requests" \
        ${rate:+--rate $rate} --out "$R/$name" "$@" 2>&1 | tee "$R/$name.txt"; }
  v single  --plan $P/llama8b-1gpu.json --model llama-3.1-8b
  v tp2     --plan $P/llama8b-tp2.json  --model llama-3.1-8b
  v pp2     --plan $P/llama8b-pp2.json  --model llama-3.1-8b
  v ep2     --plan $P/mixtral-ep2.json  --model mixtral-8x7b
  v tp2-nop2p --plan $P/llama8b-tp2.json --model llama-3.1-8b --p2p off
  v pp2-nop2p --plan $P/llama8b-pp2.json --model llama-3.1-8b --p2p off
  tar czf "$OUT/runs.tgz" -C $R .
  scripts/gpu/validate_summary.sh $R/single $R/tp2 $R/pp2 $R/ep2 $R/tp2-nop2p $R/pp2-nop2p | tee "$OUT/summary.md"
fi
