#!/usr/bin/env bash
# Robustness stage of CI (issue 8), run by .ci/run after scripts/test.sh:
#  1. brief fuzzing: every fuzz target for FUZZ_SECONDS (default 20 s) under ASan + UBSan, starting
#     from its seed corpus (shipped files, hand-written seeds and every past regression input, so
#     the regressions are replayed by the fuzz binaries themselves);
#  2. the sanitizer suite: the test modules that take hostile input, built with ASan + UBSan
#     (scripts/sanitize.sh) in the fuzzers' build directory, against the library the fuzzers
#     already built; it includes test_hostile's replay of every regression input.
# Prints the time each part took; exit status is non-zero if either part found anything.
#   scripts/ci_extra.sh                      # JOBS=<n> for the builds (default: all cores)
#   FUZZ_SECONDS=60 scripts/ci_extra.sh      # longer fuzzing
#   CI_SANITIZE=0 scripts/ci_extra.sh        # fuzzing only
set -uo pipefail
cd "$(dirname "$0")/.."
export JOBS=${JOBS:-$(nproc 2>/dev/null || echo 2)}
FUZZ_SECONDS=${FUZZ_SECONDS:-20}
# One instrumented build for both parts (see tests/fuzz/CMakeLists.txt).
export FUZZ_BUILD_DIR=${FUZZ_BUILD_DIR:-build-ci-sanitize} ASAN_BUILD_DIR=${ASAN_BUILD_DIR:-build-ci-sanitize}
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
elapsed=$(( t1 - ${CI_START:-$t0} ))
deadline=${CI_SANITIZE_DEADLINE_S:-3600}
if ((CI_SANITIZE)) && ((elapsed > deadline)); then
  echo "ci_extra: SKIPPING the sanitizer suite: this CI run has used ${elapsed} s, over ${deadline} s of its 5400 s;" \
       "run it by hand: scripts/sanitize.sh" >&2
elif ((CI_SANITIZE)); then
  scripts/sanitize.sh || status=1
fi
t2=$(date +%s)
# CI keeps only the end of the output: repeat what a fuzz finding left there, so it can be
# reproduced from the CI log alone (the report's first lines and the input, base64).
fb=${FUZZ_BUILD_DIR}
for art in "$fb"/artifacts/*/; do
  [ -d "$art" ] || continue
  t=$(basename "$art")
  for f in "$art"*; do
    [ -f "$f" ] || continue
    case "$(basename "$f")" in slow-unit-*) continue ;; esac  # wall-clock notes, not findings (fuzz.sh)
    echo "ci_extra: FINDING in fuzz target $t: $(basename "$f") ($(wc -c <"$f") bytes); report:"
    grep -a -m 12 -E "ERROR|SUMMARY|runtime error|#[0-9]+ 0x|==[0-9]+==|Timeout|timeout|out-of-memory|what\(\)" \
      "$fb/fuzz-$t.log" 2>/dev/null | cut -c1-240 | sed 's/^/  | /'
    echo "ci_extra: input (base64, first 3000 bytes; decode with base64 -d):"
    head -c 3000 "$f" | base64 | sed 's/^/  b64 /'
  done
done
echo "ci_extra: fuzzing $((t1 - t0)) s (build included), sanitizer suite $((t2 - t1)) s (build included); status $status"
exit $status
