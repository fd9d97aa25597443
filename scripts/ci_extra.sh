#!/usr/bin/env bash
# Extra CI stage for robustness (issue 8): a short pass of every fuzz target over its seed corpus
# (shipped files, hand-written seeds, past regressions) under ASan + UBSan, then the whole test
# suite in the sanitizer build. Prints the time each part took; exit status is non-zero if either
# part found anything.
#   scripts/ci_extra.sh                 # FUZZ_RUNS=2000 by default; JOBS=<n> for the builds
set -uo pipefail
cd "$(dirname "$0")/.."
export JOBS=${JOBS:-$(nproc 2>/dev/null || echo 2)}
FUZZ_RUNS=${FUZZ_RUNS:-2000}

# clang + libFuzzer runtime, as scripts/setup.sh installs the rest.
need=()
for p in clang libclang-rt-14-dev; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || need+=("$p")
done
if ((${#need[@]})); then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
scripts/setup.sh build >/dev/null  # the Debian libraries; also builds the normal tree

status=0
t0=$(date +%s)
scripts/fuzz.sh -n "$FUZZ_RUNS" || status=1
t1=$(date +%s)
scripts/sanitize.sh || status=1
t2=$(date +%s)
echo "ci_extra: fuzz pass $((t1 - t0)) s (build included), sanitizer suite $((t2 - t1)) s (build included); status $status"
exit $status
