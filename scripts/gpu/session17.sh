#!/usr/bin/env bash
# Session 17's prepared calls, one H200 (kind nvidia-h200). Binary: scripts/gpu/build.sh, packed as .gpu-pack
# (docs/DEVELOPING.md). Each call <= 600 s.
#   session17.sh A   (~4 min) bench/power/mix_throttle.py (GEMM / attention / elementwise throttle at five
#                    attention shares: the per-class power model's data, issue 18), then where the host has
#                    Nsight Systems, Qwen1.5-MoE's batch-1 decode step kernel by kernel in its CUDA graph (issue 14)
#   session17.sh B   (~8 min) a paced 8B profile (--duty 0.5: boost tables, the power throttle by class) and the
#                    8B runs of issue 18 priced from it: 8k-32k, 64k-100k prompts, chat (40 requests at 8/s), then
#                    bench/power/mix_throttle.py (torch's view of the same mixes, ~30 s)
#   session17.sh C   (~6 min) a paced Qwen1.5-MoE + Mixtral profile and their long-prompt runs priced from it
set -u
PART=${1:?usage: session17.sh A|B|C}
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
if [ "$PART" = B ]; then
  TAIL=12 step 260 profile $B profile --no-progress --dtypes bf16 --model llama-3.1-8b --duty 0.5 --out "$W/profile.json"
  grep -A5 "Power throttle" "$W/profile.txt" | sed 's/^/  | /' | tee -a "$S" >/dev/null
  v llama8b-8k-32k 110 --plan $P/llama8b-1gpu.json --model llama-3.1-8b --workload models/workloads/long-prompt-8k-32k.json
  left 400 && v llama8b-64k-100k 170 --plan $P/llama8b-1gpu.json --model llama-3.1-8b \
    --workload models/workloads/long-prompt-64k-100k.json
  left 500 && v six-single 60 --workload $V/workloads/validate-chat.json --plan $P/llama8b-1gpu.json \
    --model llama-3.1-8b --requests 40 --rate 8
  left 520 && TAIL=12 step 60 mix-throttle python3 bench/power/mix_throttle.py "$W"
  finish
fi
if [ "$PART" = C ]; then
  TAIL=12 step 200 profile $B profile --no-progress --model qwen1.5-moe-a2.7b --model mixtral-8x7b --dtypes bf16 \
    --skip nccl,nccl_nop2p --duty 0.5 --out "$W/profile.json"
  grep -A5 "Power throttle" "$W/profile.txt" | sed 's/^/  | /' | tee -a "$S" >/dev/null
  v qwen-moe-long 80 --plan $P/qwen-moe-1gpu.json --model qwen1.5-moe-a2.7b --workload $V/workloads/validate-long-prompt.json
  v mixtral-long 100 --plan $P/mixtral-1gpu.json --model mixtral-8x7b --workload $V/workloads/validate-long-prompt.json
  finish
fi
