#!/usr/bin/env bash
# Builds the CPU code with AddressSanitizer + UndefinedBehaviorSanitizer into build-asan/ and runs
# the whole ctest suite there. Any sanitizer report aborts the test that triggered it.
#   scripts/sanitize.sh            # JOBS=<n> to build/test in parallel (default: 1)
#   scripts/sanitize.sh -R hostile # extra arguments go to ctest
set -euo pipefail
cd "$(dirname "$0")/.."
JOBS=${JOBS:-1}
BUILD=${ASAN_BUILD_DIR:-build-asan}
if [ ! -f "$BUILD/CMakeCache.txt" ]; then
  cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPEERPLAN_SANITIZE=ON -DPEERPLAN_CUDA=OFF \
    -DPEERPLAN_BENCH=OFF >/dev/null
fi
cmake --build "$BUILD" -j "$JOBS" >/dev/null
# detect_leaks: a leak fails the test too. halt_on_error: the first UB report ends the test.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:strict_string_checks=1:check_initialization_order=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
cd "$BUILD"
ctest --output-on-failure -j "$JOBS" --timeout 900 "$@"
