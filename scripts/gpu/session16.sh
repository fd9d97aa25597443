#!/usr/bin/env bash
# Session 16's prepared calls, one H200 (kind nvidia-h200). Binary: scripts/gpu/build.sh from committed code,
# packed as .gpu-pack (docs/DEVELOPING.md). Each call <= 600 s.
#   session16.sh S5   (~6 min) session 15's S5 (8B decode steps, fused norm and separate residual adds, beside
#                     .gpu-ref/torch_ref.py), then where the GPU host has Nsight Systems, Qwen1.5-MoE's batch-1
#                     decode step kernel by kernel inside its CUDA graph (issue 14: 2.2x the HBM time of its bytes)
#   session16.sh P    (~2 min) bench/power/mix_throttle.py: each class's throttle factor at five attention shares
set -u
PART=${1:?usage: session16.sh S5|P}
OUT_DEFAULT=/tmp/peerplan-s16
if [ "$PART" = S5 ]; then
  bash "$(dirname "$0")/session15.sh" S5
  source "$(dirname "$0")/call_lib.sh"
  NSYS=$(command -v nsys || ls /usr/local/cuda*/bin/nsys /opt/nvidia/nsight-systems/*/bin/nsys 2>/dev/null | head -1)
  log "nsys: ${NSYS:-none on this host}"
  if [ -n "$NSYS" ]; then
    TAIL=4 step 150 nsys-qwen-b1 "$NSYS" profile --cuda-graph-trace=node --trace=cuda -o "$W/qwen-b1" --force-overwrite true \
      $B validate --bench-steps --plan $P/qwen-moe-1gpu.json --model qwen1.5-moe-a2.7b --machine "$OUT/wS5/profile-hbm.json" \
      --allow-other-host --batches 1 --context 1024 --out "$W/steps-qwen"
    TAIL=60 step 90 nsys-qwen-b1-kernels "$NSYS" stats --report cuda_gpu_kern_sum --format csv -o "$W/qwen-b1" "$W/qwen-b1.nsys-rep"
    rm -f "$W"/qwen-b1.nsys-rep "$W"/qwen-b1.sqlite
  fi
  finish
fi
if [ "$PART" = P ]; then
  # (~1.5 min) the throttle of each class at five attention/GEMM mixes: the data for a per-class power model.
  source "$(dirname "$0")/call_lib.sh"
  TAIL=12 step 120 mix-throttle python3 bench/power/mix_throttle.py "$W"
  finish
fi
