#!/usr/bin/env bash
# Issue 16's GPU part: a data-parallel plan executed as its copies behind the router (one engine and
# one host thread per copy, profiler/exec/serve.cpp) and validated like any plan, on the 2 x H200
# host (device kind nvidia-h200-x2). One device call, built here first (scripts/gpu/build.sh):
#   run(kind="nvidia-h200-x2", carry=[".gpu"], command="scripts/gpu/issue_16.sh")
# Order: a fresh profile of this lease (the predictions are priced from it), then Llama-3.1-8B on
# one GPU at RATE, two copies (least_outstanding, then round_robin) at 2 x RATE, and TP2 at
# 2 x RATE (the verdict "replicas or one wider plan", measured). Each run under its own timeout and
# appended to $OUT/issue16.tar as it ends; the summary lines go to the console.
set -u
source scripts/gpu/env.sh
OUT=${OUT:-/tmp/peerplan-out}
N=${REQUESTS:-200}
RATE=${RATE:-6}
W=$(mktemp -d)
mkdir -p "$OUT"
nvidia-smi --query-gpu=index,name,uuid,driver_version,memory.used --format=csv
nvidia-smi topo -m | head -4
timeout ${PROFILE_TIMEOUT:-300} peerplan profile --out "$W/profile.json" --name h200x2-lease > "$W/profile.txt" 2>&1
echo "profile rc=$?"; tail -3 "$W/profile.txt"
M=$W/profile.json; [ -f "$M" ] || { echo "no profile: using the shipped one"; M=models/hardware/h200x2-nvlink.json; }
P=docs/validation/plans
WL=docs/validation/workloads/validate-chat.json
v() { local name=$1 rate=$2; shift 2; echo "+ validate $name --rate $rate $*"
  timeout ${VALIDATE_TIMEOUT:-120} peerplan validate --workload $WL --machine "$M" --requests "$N" --rate "$rate" \
    --out "$W/$name" "$@" > "$W/$name.txt" 2>&1; echo "rc=$?" >> "$W/$name.txt"
  grep -E "ttft_p50|tpot_p50|e2e_p99|throughput|goodput|rc=|error" "$W/$name.txt" | head -12
  tar rf "$OUT/issue16.tar" -C "$W" "$name.txt" $( [ -d "$W/$name" ] && echo "$name" ); }
v single  "$RATE"              --plan $P/llama8b-1gpu.json --model llama-3.1-8b
v dp2-lo  "$((RATE * 2))"      --plan $P/llama8b-dp2.json  --model llama-3.1-8b
sed 's/least_outstanding/round_robin/' $P/llama8b-dp2.json > "$W/dp2-rr.json"
v dp2-rr  "$((RATE * 2))"      --plan "$W/dp2-rr.json"     --model llama-3.1-8b
v tp2     "$((RATE * 2))"      --plan $P/llama8b-tp2.json  --model llama-3.1-8b
cp "$W/profile.txt" "$OUT/" 2>/dev/null
ls -la "$OUT"
