#!/usr/bin/env bash
# Golden outputs: runs every case of tests/golden/cases.txt with the given peerplan binary and
# compares stdout (and the exit status) with tests/golden/out/<name>.txt.
#   tests/golden/check.sh BINARY            compare (exit 1 on any difference, the diff printed)
#   tests/golden/check.sh BINARY --record   write the expected files anew (say why in the commit)
set -uo pipefail
bin=$(realpath "$1"); mode=${2:-}
cd "$(dirname "$0")/../.."
out=tests/golden/out; mkdir -p "$out"
fail=0; n=0
while IFS='|' read -r name args; do
  name=$(echo "$name" | xargs); [[ -z "$name" || "$name" == \#* ]] && continue
  n=$((n + 1))
  # wall-clock fields are the only figures that may differ between two runs of one binary
  got=$( (eval "\"$bin\" $args" 2>/dev/null; echo "exit $?") | sed -E 's/"wall_s": [0-9.e+-]+/"wall_s": "(not compared)"/')
  if [[ "$mode" == --record ]]; then
    printf '%s\n' "$got" > "$out/$name.txt"
  elif ! diff -u "$out/$name.txt" <(printf '%s\n' "$got") > /tmp/golden-diff.$$ 2>&1; then
    echo "golden: $name differs:"; head -40 /tmp/golden-diff.$$; fail=1
  fi
done < tests/golden/cases.txt
rm -f /tmp/golden-diff.$$
[[ "$mode" == --record ]] && echo "golden: recorded $n cases" || echo "golden: $n cases, $([[ $fail == 0 ]] && echo all identical || echo DIFFERENCES)"
exit $fail
