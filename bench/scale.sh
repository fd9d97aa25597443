#!/usr/bin/env bash
# Scale bench (issue 21, class 5): a machine of HOSTS x 8 GPUs (bench/make_machine.py) through
# `topo` and `plans` (all built-in strategies), with wall time and peak RSS of each command, and a
# long simulation's time and peak RSS. Target on the 2-core dev VM: 1024 GPUs load, route and list
# in <= 10 s and <= 2 GB per command. docs/robustness.md records the figures.
#
# usage: bench/scale.sh [BINARY] [HOSTS ...]      (default: build/planner/cli/peerplan, hosts 4 16 64 128)
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
bin=${1:-$here/build/planner/cli/peerplan}
shift || true
hosts=("$@")
[ ${#hosts[@]} -gt 0 ] || hosts=(4 16 64 128)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

measure() {  # label, command...: prints "label  seconds  peak-MiB  exit"
  local label=$1
  shift
  local rc=0
  /usr/bin/time -f '%e %M' -o "$tmp/time" "$@" > "$tmp/out" 2> "$tmp/err" || rc=$?
  read -r secs kib < <(tail -1 "$tmp/time")
  printf '%-44s %8.2f s %8.0f MiB  exit %d\n' "$label" "$secs" "$((kib / 1024))" "$rc"
}

echo "peerplan scale bench, $(nproc) cores, $(date -u +%Y-%m-%dT%H:%MZ), $bin"
for h in "${hosts[@]}"; do
  python3 "$here/bench/make_machine.py" "$h" "$tmp/m.json"
  n=$((h * 8))
  measure "topo (matrix), $n GPUs" "$bin" topo --machine "$tmp/m.json"
  measure "topo --format json, $n GPUs" "$bin" topo --machine "$tmp/m.json" --format json
  measure "plans (all built-ins), llama-3.1-70b, $n GPUs" "$bin" plans --model llama-3.1-70b --machine "$tmp/m.json" --json
  grep -c '"name"' "$tmp/out" > /dev/null && printf '%-44s %s plans\n' "" "$(python3 -c "import json,sys; print(len(json.load(open('$tmp/out'))['plans']))")"
  grep -h "warning" "$tmp/err" | head -3 || true
done
# Simulation memory follows the requests in flight, not their total (past 100 000 requests the
# metrics are streamed; planner/sim/simulate.cpp): peak RSS should barely move from 10^6 to 10^7.
# SIM_REQUESTS="100000 1000000" skips the 10^7 run (minutes on the 2-core VM).
for r in ${SIM_REQUESTS:-100000 1000000 10000000}; do
  measure "simulate llama-3.1-8b tp2, $r requests" "$bin" simulate --plan "$here/docs/validation/plans/llama8b-tp2.json" \
    --model llama-3.1-8b --machine h200x2-nvlink --workload chat --requests "$r"
done
