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
  # clang at -O1 with line tables: ~2.5x less CPU to build than gcc -O2 -g with the sanitizers on
  # (83 s vs 33 s on cmd_simulate.cpp + trace.cpp, 2026-12-01), same reports with readable stack
  # traces. gcc is the fallback when clang is missing. MPI off: Open MPI's own leaks would fail LSan.
  compiler=()
  if command -v clang++ >/dev/null; then compiler=(-DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++); fi
  cmake -S . -B "$BUILD" "${compiler[@]}" -DCMAKE_BUILD_TYPE=Sanitize -DCMAKE_CXX_FLAGS_SANITIZE="-O1 -gline-tables-only" \
    -DPEERPLAN_SANITIZE=ON -DPEERPLAN_CUDA=OFF -DPEERPLAN_MPI=OFF -DPEERPLAN_BENCH=OFF >/dev/null
fi
cmake --build "$BUILD" -j "$JOBS" >/dev/null
# detect_leaks: a leak fails the test too. halt_on_error: the first UB report ends the test.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:strict_string_checks=1:check_initialization_order=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
cd "$BUILD"
# ScaleHostile runs the built-in strategies on 64 and 1024 GPUs against their default wall-clock and
# CPU limits: under ASan they run several times slower, so those limits would measure the sanitizer,
# not the strategies. The optimised build runs them in scripts/test.sh.
ctest --output-on-failure -j "$JOBS" --timeout 900 -E 'ScaleHostile' "$@"
