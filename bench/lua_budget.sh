#!/usr/bin/env bash
# What the built-in strategies use of their Lua budget (issue 16): for each plugins/*.lua on each
# machine, the wall time of `plans --strategy NAME` (median of 3, the process's start and the
# topology included), the smallest instruction budget (--lua-instructions, by doubling from 2^16,
# so within a factor 2 above) and the smallest memory cap (--lua-memory-mib, doubling from 1 MiB)
# it runs within. planner/strategy/lua_limits.hpp states the defaults' margin from these figures.
#
# usage: bench/lua_budget.sh [BINARY] [MODEL] [MACHINE ...]
#        (default: build/planner/cli/peerplan, llama-3.1-70b, hgx-h100x8 hgx-h100x8-x8nodes and
#        128 hosts of 8 GPUs written by bench/make_machine.py)
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
bin=${1:-$here/build/planner/cli/peerplan}
model=${2:-llama-3.1-70b}
shift 2 || shift $# || true
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
machines=("$@")
if [ ${#machines[@]} -eq 0 ]; then
  python3 "$here/bench/make_machine.py" 128 "$tmp/x128.json"
  machines=(hgx-h100x8 hgx-h100x8-x8nodes "$tmp/x128.json")
fi
# Generous everything but the limit under test.
big=(--lua-seconds 600 --lua-instructions 1000000000000 --lua-memory-mib 4096)

runs() {  # strategy machine extra...: exit status of one `plans` run
  local s=$1 m=$2
  shift 2
  "$bin" plans --model "$model" --machine "$m" --strategy "$s" --json "$@" > /dev/null 2> "$tmp/err"
}

smallest() {  # strategy machine option start: the smallest doubling value of option that runs
  local s=$1 m=$2 opt=$3 v=$4 rest=()
  for ((i = 0; i < ${#big[@]}; i += 2)); do [ "${big[i]}" = "$opt" ] || rest+=("${big[i]}" "${big[i + 1]}"); done
  while ! runs "$s" "$m" "${rest[@]}" "$opt" "$v"; do
    v=$((v * 2))
    [ "$v" -lt 100000000000000 ] || { echo "-"; return; }
  done
  echo "$v"
}

echo "peerplan Lua budget of the built-ins, $model, $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg), $(date -u +%Y-%m-%dT%H:%MZ)"
printf '%-22s %-20s %8s %16s %10s\n' machine strategy "wall s" "instructions <=" "MiB <="
for m in "${machines[@]}"; do
  for f in "$here"/plugins/*.lua; do
    s=$(basename "$f" .lua)
    ts=()
    for i in 1 2 3; do
      start=$(date +%s.%N)
      runs "$s" "$m" "${big[@]}" || true
      ts+=("$(echo "$(date +%s.%N) - $start" | bc -l)")
    done
    wall=$(printf '%s\n' "${ts[@]}" | sort -g | sed -n 2p)
    ins=$(smallest "$s" "$m" --lua-instructions 65536)
    mib=$(smallest "$s" "$m" --lua-memory-mib 1)
    printf '%-22s %-20s %8.2f %16s %10s\n' "$(basename "$m" .json)" "$s" "$wall" "$ins" "$mib"
  done
done
