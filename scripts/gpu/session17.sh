#!/usr/bin/env bash
# Session 17's prepared calls, one H200 (kind nvidia-h200). Binary: scripts/gpu/build.sh, packed as .gpu-pack
# (docs/DEVELOPING.md). Each call <= 600 s.
#   session17.sh A   (~4 min) bench/power/mix_throttle.py (GEMM / attention / elementwise throttle at five
#                    attention shares: the per-class power model's data, issue 18), then where the host has
#                    Nsight Systems, Qwen1.5-MoE's batch-1 decode step kernel by kernel in its CUDA graph (issue 14)
set -u
PART=${1:?usage: session17.sh A}
OUT_DEFAULT=/tmp/peerplan-s17
source "$(dirname "$0")/call_lib.sh"
if [ "$PART" = A ]; then
  TAIL=12 step 150 mix-throttle python3 bench/power/mix_throttle.py "$W"
  NSYS=$(command -v nsys || ls /usr/local/cuda*/bin/nsys /opt/nvidia/nsight-systems/*/bin/nsys 2>/dev/null | head -1)
  log "nsys: ${NSYS:-none on this host}"
  TAIL=3 step 40 profile-hbm $B profile --only hbm --no-progress --out "$W/profile-hbm.json"
  if [ -n "$NSYS" ]; then
    TAIL=4 step 150 nsys-qwen-b1 "$NSYS" profile --cuda-graph-trace=node --trace=cuda -o "$W/qwen-b1" --force-overwrite true \
      $B validate --bench-steps --plan $P/qwen-moe-1gpu.json --model qwen1.5-moe-a2.7b --machine "$W/profile-hbm.json" \
      --allow-other-host --batches 1 --context 1024 --out "$W/steps-qwen"
    TAIL=70 step 90 nsys-qwen-b1-kernels "$NSYS" stats --report cuda_gpu_kern_sum --format csv -o "$W/qwen-b1" "$W/qwen-b1.nsys-rep"
    TAIL=3 step 90 nsys-qwen-b1-trace "$NSYS" stats --report cuda_gpu_trace --format csv -o "$W/qwen-b1-trace" "$W/qwen-b1.nsys-rep"
    gzip -f "$W"/qwen-b1-trace*.csv 2>/dev/null
    rm -f "$W"/qwen-b1.nsys-rep "$W"/qwen-b1.sqlite
  else
    TAIL=8 step 60 steps-qwen $B validate --bench-steps --plan $P/qwen-moe-1gpu.json --model qwen1.5-moe-a2.7b \
      --machine "$W/profile-hbm.json" --allow-other-host --batches 1,8 --context 1024 --out "$W/steps-qwen"
  fi
  finish
fi
