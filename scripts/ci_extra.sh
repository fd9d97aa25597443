#!/usr/bin/env bash
# Robustness stage of CI (issue 8), run by .ci/run after scripts/test.sh:
#  1. brief fuzzing: every fuzz target for FUZZ_SECONDS (default 25 s) under ASan + UBSan, starting
#     from its seed corpus (shipped files, hand-written seeds and every past regression input, so
#     the regressions are replayed by the fuzz binaries themselves);
#  2. the sanitizer suite: the whole ctest suite built with ASan + UBSan (scripts/sanitize.sh),
#     which includes test_hostile's replay of every regression input through the fuzz targets.
# Prints the time each part took; exit status is non-zero if either part found anything.
#   scripts/ci_extra.sh                      # JOBS=<n> for the builds (default: all cores)
#   FUZZ_SECONDS=60 scripts/ci_extra.sh      # longer fuzzing
#   CI_SANITIZE=0 scripts/ci_extra.sh        # fuzzing only
set -uo pipefail
cd "$(dirname "$0")/.."
export JOBS=${JOBS:-$(nproc 2>/dev/null || echo 2)}
FUZZ_SECONDS=${FUZZ_SECONDS:-25}
CI_SANITIZE=${CI_SANITIZE:-1}

# clang + the libFuzzer runtime (scripts/setup.sh installs the rest).
need=()
for p in clang libclang-rt-14-dev; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || need+=("$p")
done
if ((${#need[@]})); then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
scripts/setup.sh build >/dev/null  # the Debian libraries (a no-op after scripts/test.sh)

status=0
t0=$(date +%s)
scripts/fuzz.sh -t "$FUZZ_SECONDS" || status=1
t1=$(date +%s)
if ((CI_SANITIZE)); then
  scripts/sanitize.sh || status=1
fi
t2=$(date +%s)
echo "ci_extra: fuzzing $((t1 - t0)) s (build included), sanitizer suite $((t2 - t1)) s (build included); status $status"
exit $status
