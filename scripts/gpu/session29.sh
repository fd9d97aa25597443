#!/usr/bin/env bash
# Session 29's prepared call, one GPU. Binary: scripts/gpu/build.sh, packed as .gpu-pack (docs/DEVELOPING.md).
# One call <= 600 s.
#   session29.sh M   (~9 min, H100 or H200) Mixtral-8x7B's eager prefill priced per expert: a paced profile with
#     the new expert_gemms table (one expert's cuBLAS-path call at rows in steps of 32) and the grouped cuBLAS rows'
#     expert_rows, then Mixtral long prompts (int8; bf16 too on an H200: 93 GB), the runs whose TTFT every profile
#     so far over-priced by 7-18 % (docs/moe_routing.md, "Mixtral long prompts"), and int8 chat.
set -u
PART=${1:?usage: session29.sh M}
OUT_DEFAULT=/tmp/peerplan-s29
source "$(dirname "$0")/call_lib.sh"
if [ "$PART" = M ]; then
  big=$(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits | head -1 | awk '{print ($1 > 120000)}')
  dt=int8; [ "$big" = 1 ] && dt=int8,bf16
  TAIL=4 step 300 profile $B profile --no-progress --model mixtral-8x7b --dtypes $dt --skip nccl,nccl_nop2p --duty 0.5 \
    --out "$W/profile.json"
  # One expert's call by rows around cuBLASLt's kernel changes, per (n, k, format): what the pricer now sums.
  python3 - "$W/profile.json" <<'PY' 2>&1 | tee -a "$S"
import json, sys
m = json.load(open(sys.argv[1]))
rows = m.get("measurements", m).get("expert_gemms", [])
print(f"  | expert_gemms rows: {len(rows)}")
by = {}
for r in rows: by.setdefault((r["n"], r["k"], r["dtype"]), {})[r["rows"]] = r["median_us"]
for key, c in sorted(by.items()):
    pick = [r for r in sorted(c) if r in (64, 256, 448, 480, 512, 544, 576, 960, 992, 1024, 1056, 1088)]
    print("  | %s: " % (key,) + " ".join(f"{r}:{c[r]:.0f}" for r in pick))
PY
  v mixtral-int8-long 120 --plan $P/mixtral-1gpu.json --model mixtral-8x7b --weights int8 \
    --workload $V/workloads/validate-long-prompt.json
  [ "$big" = 1 ] && left 400 && v mixtral-bf16-long 120 --plan $P/mixtral-1gpu.json --model mixtral-8x7b \
    --workload $V/workloads/validate-long-prompt.json
  left 480 && v mixtral-int8-chat 100 --plan $P/mixtral-1gpu.json --model mixtral-8x7b --weights int8 \
    --workload $V/workloads/validate-chat.json
  finish
fi
echo "unknown part $PART" >&2; exit 2
