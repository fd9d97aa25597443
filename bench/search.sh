#!/usr/bin/env bash
# Search-at-scale bench (issue 16): wall time of `peerplan plan` (every built-in strategy, the
# simulation of the candidates, the ranking) for the issue's cases, median of RUNS runs, with the
# candidates, how many were ranked (simulated), rejected (did not fit / failed) and pruned before
# simulation (when the search reports it: planner/search/prune.hpp). Targets on the 2-core dev VM:
# <= 2 s for Llama-3.1-70B on hgx-h100x8, <= 10 s for 70B and a 671B MoE on a 64-GPU cluster.
# docs/simulator.md ("Search at scale") records the figures.
#
# usage: bench/search.sh [BINARY] [RUNS]     (default: build/planner/cli/peerplan, 3 runs)
#        CASES="llama-3.1-70b:hgx-h100x8:2[:OPTS] ..." to choose cases (OPTS: options of that case,
#        commas for spaces, e.g. --weights=fp8; a list option repeated: --dtypes=bf16,--dtypes=fp8);
#        EXTRA="--rate 16" adds options to every case
#        (EXTRA="--screen 0": every plan fully simulated, as before screening)
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
bin=${1:-$here/build/planner/cli/peerplan}
runs=${2:-3}
cases=${CASES:-"llama-3.1-70b:hgx-h100x8:2 llama-3.1-70b-fp8:hgx-h100x8:2 llama-3.1-70b:hgx-h100x8:2:--weights=fp8,--kv-dtype=fp8 llama-3.1-70b:hgx-h100x8-x8nodes:10 deepseek-v3:hgx-h100x8-x8nodes:10 llama-3.1-70b:hgx-h100x8:2:--dtypes=bf16,--dtypes=fp8,--kv-dtypes=bf16,--kv-dtypes=fp8 deepseek-v3:hgx-h100x8-x8nodes:10:--kv-dtypes=bf16,--kv-dtypes=fp8"}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

echo "peerplan search bench, $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg), $(date -u +%Y-%m-%dT%H:%MZ), $bin ${EXTRA:-}"
printf '%-20s %-20s %6s %8s %8s %8s %8s %9s %7s  %s\n' model machine target plans ranked rejected pruned "median s" runs "all runs (s)"
for c in $cases; do
  IFS=: read -r model machine target opts <<< "$c"
  opts=${opts//,/ }
  times=()
  for ((i = 0; i < runs; i++)); do
    start=$(date +%s.%N)
    rc=0
    # shellcheck disable=SC2086
    "$bin" plan --model "$model" --machine "$machine" --json $opts ${EXTRA:-} > "$tmp/out.json" 2> "$tmp/err" || rc=$?
    end=$(date +%s.%N)
    if [ "$rc" -ne 0 ]; then
      echo "$model on $machine: exit $rc: $(head -c 400 "$tmp/err")"
      continue 2
    fi
    times+=("$(echo "$end - $start" | bc -l)")
  done
  read -r plans ranked rejected pruned < <(python3 - "$tmp/out.json" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
ranked, rejected = len(d.get("ranked", [])), len(d.get("rejected", []))
# pruned (bounds) and screened-out plans are listed under rejected; provenance.pruned counts them
pruned = d.get("provenance", {}).get("pruned", 0)
print(ranked + rejected, ranked, rejected - pruned, pruned)
EOF
)
  median=$(printf '%s\n' "${times[@]}" | sort -g | awk '{a[NR]=$1} END {print a[int((NR + 1) / 2)]}')
  all=$(printf '%.2f ' "${times[@]}")
  printf '%-20s %-20s %5ss %8s %8s %8s %8s %9.2f %7s  %s%s\n' "$model" "$machine" "$target" "$plans" "$ranked" "$rejected" \
    "$pruned" "$median" "$runs" "$all" "${opts:+ ($opts)}"
done
