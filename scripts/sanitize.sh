#!/usr/bin/env bash
# Builds the CPU code with AddressSanitizer + UndefinedBehaviorSanitizer into build-asan/ and runs the
# test modules that feed the code hostile input (files, Lua, CLI options) under it. Any sanitizer report
# aborts the test that triggered it.
#   scripts/sanitize.sh                      # the hostile-input modules (what CI runs)
#   SANITIZE_MODULES=all scripts/sanitize.sh # every module (about 2.5x the CPU: the whole suite)
#   SANITIZE_MODULES="sim cost" scripts/sanitize.sh -R Router   # chosen modules; extra args go to ctest
# JOBS=<n> builds/tests in parallel (default: 1).
#
# Why a subset in CI: on the 2-core CI runner the whole suite under ASan took 2 174 s (build 1 600 s)
# of the 90-minute budget (CI run of 66ff659). The modules below are where untrusted bytes enter
# (JSON/XML/GGUF readers, the Lua sandbox, every CLI command end to end); the library they link is the
# whole planner, so its code runs instrumented too. The fuzz targets (scripts/fuzz.sh) cover the same
# readers under ASan from the other side. The rest of the suite runs optimised in scripts/test.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
JOBS=${JOBS:-1}
BUILD=${ASAN_BUILD_DIR:-build-asan}
MODULES=${SANITIZE_MODULES:-"core model topology strategy hostile"}
if [ ! -f "$BUILD/CMakeCache.txt" ]; then
  # clang at -O1 with line tables: ~2.5x less CPU to build than gcc -O2 -g with the sanitizers on
  # (83 s vs 33 s on cmd_simulate.cpp + trace.cpp, 2026-12-01), same reports with readable stack
  # traces. gcc is the fallback when clang is missing. MPI off: Open MPI's own leaks would fail LSan.
  compiler=()
  if command -v clang++ >/dev/null; then compiler=(-DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++); fi
  cmake -S . -B "$BUILD" "${compiler[@]}" -DCMAKE_BUILD_TYPE=Sanitize -DCMAKE_CXX_FLAGS_SANITIZE="-O1 -gline-tables-only" \
    -DPEERPLAN_SANITIZE=ON -DPEERPLAN_CUDA=OFF -DPEERPLAN_MPI=OFF -DPEERPLAN_BENCH=OFF >/dev/null
fi
# ScaleHostile runs the built-in strategies on 64 and 1024 GPUs against their default wall-clock and
# CPU limits: under ASan they run several times slower, so those limits would measure the sanitizer,
# not the strategies. EveryBuiltinOnEveryModelAndMachine is a sweep of the same code the other strategy
# tests run (131 s under ASan). The optimised build runs both in scripts/test.sh.
exclude='ScaleHostile|EveryBuiltinOnEveryModelAndMachine'
if [ "$MODULES" = all ]; then
  cmake --build "$BUILD" -j "$JOBS" >/dev/null
  select=()
else
  targets=(peerplan)   # the CLI: the hostile tests run it end to end
  for m in $MODULES; do targets+=("test_$m"); done
  cmake --build "$BUILD" -j "$JOBS" --target "${targets[@]}" >/dev/null
  select=(-L "^($(echo "$MODULES" | tr ' ' '|'))\$")
fi
# detect_leaks: a leak fails the test too. halt_on_error: the first UB report ends the test.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:strict_string_checks=1:check_initialization_order=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
cd "$BUILD"
echo "sanitize: modules: $MODULES" >&2
ctest --output-on-failure -j "$JOBS" --timeout 900 "${select[@]}" -E "$exclude" "$@"
