#!/usr/bin/env bash
# Session 14, one H200 (kind nvidia-h200). Binary: scripts/gpu/build.sh from committed code, packed as .gpu-pack
# (docs/DEVELOPING.md). Each call <= 600 s.
#   session14.sh S1   (~8 min) the SM clock under tensor-core work (bench/power/clock_response.py: sustained, duty
#                     cycles, recovery), then the default 8B profile and 8B's chat and long-prompt runs with NVML
#                     sampled every 5 ms beside them (clocks-*.csv: the clock of each iteration)
#   session14.sh S2   (~9 min) the paced profile (--duty 0.5: compute tables at boost, power throttle measured)
#                     beside a back-to-back GEMM table of the lease, then S1's runs and the 200-request chat run priced
#                     from the paced profile
#   session14.sh S3   (~9 min) issue 14's cuBLAS-per-expert prefill: every kernel's self-test, bench/moe/run.sh (the
#                     executor beside torch._grouped_mm, the dispatch against the grouped kernel at 2048-token
#                     prefill), then a paced profile of Qwen1.5-MoE and Mixtral and their long-prompt runs
set -u
PART=${1:?usage: session14.sh S1|S2|S3}
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
if [ "$PART" = S2 ]; then
  # The paced profile (compute tables at boost, power throttle measured) beside a back-to-back GEMM table of the
  # same lease, then S1's runs priced from the paced one.
  sampler profile
  TAIL=4 step 240 profile $B profile --no-progress --dtypes bf16 --model llama-3.1-8b --duty 0.5 --out "$W/profile.json"
  TAIL=2 step 120 profile-b2b $B profile --no-progress --only gemm --dtypes bf16 --model llama-3.1-8b --out "$W/profile-b2b.json"
  python3 - "$W/profile.json" "$W/profile-b2b.json" <<'PY' | tee -a "$S"
import json, sys
a, b = (json.load(open(p))["measurements"] for p in sys.argv[1:])
print("power_throttle (paced profile):", a.get("power_throttle"), " (back to back):", b.get("power_throttle"))
kb = {(g["m"], g["n"], g["k"]): g for g in b["gemms"]}
r = sorted((kb[k]["median_us"] / g["median_us"], k) for g in a["gemms"] if (k := (g["m"], g["n"], g["k"])) in kb)
print(f"GEMM rows, back to back / paced: n={len(r)} min {r[0][0]:.3f} median {r[len(r)//2][0]:.3f} max {r[-1][0]:.3f}")
for g in a["gemms"]:
    k = (g["m"], g["n"], g["k"])
    if g["m"] in (256, 1024, 4096, 8192) and k in kb:
        print(f"  m={g['m']} n={g['n']} k={g['k']}: paced {g['median_us']:.1f} us at {g.get('sm_mhz', 0):.0f} MHz, "
              f"back to back {kb[k]['median_us']:.1f} at {kb[k].get('sm_mhz', 0):.0f}")
PY
  CHAT=$V/workloads/validate-chat.json
  log "clock mark: chat start $(date +%s.%N)"
  v six-single 60 --workload $CHAT --plan $P/llama8b-1gpu.json --model llama-3.1-8b --requests 40 --rate 8
  v 8b-single-r6 90 --workload $CHAT --plan $P/llama8b-1gpu.json --model llama-3.1-8b --requests 200 --rate 6
  log "clock mark: 8k-32k start $(date +%s.%N)"
  v llama8b-8k-32k 110 --plan $P/llama8b-1gpu.json --model llama-3.1-8b --workload models/workloads/long-prompt-8k-32k.json
  log "clock mark: 64k-100k start $(date +%s.%N)"
  left 410 && v llama8b-64k-100k 170 --plan $P/llama8b-1gpu.json --model llama-3.1-8b \
    --workload models/workloads/long-prompt-64k-100k.json
  log "clock mark: end $(date +%s.%N)"
  sampler_end
  finish
fi
if [ "$PART" = S3 ]; then
  CUDA_VISIBLE_DEVICES=0 TAIL=4 step 150 selftest $B validate --self-test
  grep -iE "fail" "$W/selftest.txt" | head -5 | sed 's/^/  self-test FAIL line: /' | tee -a "$S"
  grep -iE "moe|expert" "$W/selftest.txt" | tail -8 | sed 's/^/  | /' | tee -a "$S"
  OUT=$W/moe MOE_W=$W/moe/w GG_S=45 bash bench/moe/run.sh .gpu 2>&1 | tail -n 45 | tee -a "$S" >/dev/null
  left 420 && TAIL=3 step 150 profile $B profile --no-progress --model qwen1.5-moe-a2.7b --model mixtral-8x7b --dtypes bf16 \
    --skip nccl,nccl_nop2p --duty 0.5 --out "$W/profile.json"
  left 470 && v qwen-moe-long 70 --plan $P/qwen-moe-1gpu.json --model qwen1.5-moe-a2.7b --workload $V/workloads/validate-long-prompt.json
  left 500 && v mixtral-long 90 --plan $P/mixtral-1gpu.json --model mixtral-8x7b --workload $V/workloads/validate-long-prompt.json
  left 470 && TAIL=50 step 100 clock-response python3 bench/power/clock_response.py "$W" && gzip -f "$W/clock_response.json"
  finish
fi
