#!/usr/bin/env bash
# Session 14, one H200 (kind nvidia-h200). Binary: scripts/gpu/build.sh from committed code, packed as .gpu-pack
# (docs/DEVELOPING.md). Each call <= 600 s.
#   session14.sh S1   (~8 min) the SM clock under tensor-core work (bench/power/clock_response.py: sustained, duty
#                     cycles, recovery), then the default 8B profile and 8B's chat and long-prompt runs with NVML
#                     sampled every 5 ms beside them (clocks-*.csv: the clock of each iteration)
set -u
PART=${1:?usage: session14.sh S1}
OUT_DEFAULT=/tmp/peerplan-s14
source "$(dirname "$0")/call_lib.sh"
sampler() { python3 bench/power/clock_response.py --sample "$W/clocks-$1.csv" & SMP=$!; log "clock mark: $1 start $(date +%s.%N)"; }
sampler_end() { kill -TERM $SMP; wait $SMP 2>/dev/null; gzip -f "$W"/clocks-*.csv; }
if [ "$PART" = S1 ]; then
  TAIL=40 step 120 clock-response python3 bench/power/clock_response.py "$W"
  gzip -f "$W/clock_response.json"
  sampler profile
  TAIL=4 step 200 profile $B profile --no-progress --dtypes bf16 --model llama-3.1-8b --out "$W/profile.json"
  CHAT=$V/workloads/validate-chat.json
  log "clock mark: chat start $(date +%s.%N)"
  v six-single 60 --workload $CHAT --plan $P/llama8b-1gpu.json --model llama-3.1-8b --requests 40 --rate 8
  log "clock mark: 8k-32k start $(date +%s.%N)"
  v llama8b-8k-32k 110 --plan $P/llama8b-1gpu.json --model llama-3.1-8b --workload models/workloads/long-prompt-8k-32k.json
  log "clock mark: 64k-100k start $(date +%s.%N)"
  left 380 && v llama8b-64k-100k 170 --plan $P/llama8b-1gpu.json --model llama-3.1-8b \
    --workload models/workloads/long-prompt-64k-100k.json
  log "clock mark: end $(date +%s.%N)"
  sampler_end
  finish
fi
