#!/usr/bin/env bash
# Builds the libFuzzer targets (clang, ASan + UBSan, coverage on the whole planner library) into
# build-fuzz/ and runs each target for a number of executions on a seed corpus made of the shipped
# files it reads, the hand-written seeds and every past regression input.
#
#   scripts/fuzz.sh                      # every target, 1 000 000 executions each
#   scripts/fuzz.sh -n 2000              # a quick pass
#   scripts/fuzz.sh -t 25                # 25 s per target (what scripts/ci_extra.sh runs)
#   scripts/fuzz.sh -n 5000000 plan lua  # only these targets
#   scripts/fuzz.sh --list               # the targets that exist
#   scripts/fuzz.sh --keep-going         # fork mode: record every finding and keep fuzzing past it
#
# A finding (crash, sanitizer report, leak, uncaught exception, broken invariant, >10 s per input,
# >2 GB RSS) stops that target; its input lands in build-fuzz/artifacts/<target>/. Minimise it with
#   build-fuzz/fuzz/fuzz_<target> -minimize_crash=1 -runs=20000 <file>
# then keep it as tests/fuzz/regressions/<target>/<what-it-is>.<ext>: the replay test in
# test_hostile runs it from then on. Exit status: 0 if no target found anything, 1 otherwise.
# One summary line per target goes to stdout and is appended to build-fuzz/fuzz-runs.tsv.
set -euo pipefail
cd "$(dirname "$0")/.."

RUNS=""
SECONDS_PER_TARGET=0
JOBS=${JOBS:-1}
BUILD=${FUZZ_BUILD_DIR:-build-fuzz}
LIST=0
KEEP_GOING=0
TARGETS=()
while (($#)); do
  case "$1" in
    -n|--runs) RUNS="$2"; shift 2 ;;
    --list) LIST=1; shift ;;
    --keep-going) KEEP_GOING=1; shift ;;
    -t|--time) SECONDS_PER_TARGET="$2"; shift 2 ;;
    -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
    -*) echo "fuzz.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
    *) TARGETS+=("$1"); shift ;;
  esac
done

CXX_BIN=$(command -v clang++ || command -v clang++-14 || true)
CC_BIN=$(command -v clang || command -v clang-14 || true)
if [ -z "$CXX_BIN" ]; then
  echo "fuzz.sh: clang++ not found; install clang and libclang-rt-dev (Debian: apt-get install clang libclang-rt-14-dev)" >&2
  exit 2
fi

# Shipped inputs per target (the same places as the table in tests/fuzz/targets.hpp).
shipped() {
  case "$1" in
    json_in)      find models -name '*.json' ;;
    model_config) find models/llm -name config.json; find tests/data/model -name '*.json' ;;
    workload)     find models/workloads -name '*.json' ;;
    machine)      find models/hardware tests/data/strategy -name '*.json' ;;
    nccl_xml)     find models/hardware tests/data -name '*.xml' ;;
    plan)         find tests/golden tests/data -name '*.plan.json' ;;
    lua)          find plugins -maxdepth 1 -name '*.lua' ;;
    gguf)         find tests/data/model -name '*.gguf' ;;
  esac 2>/dev/null || true
}

if [ ! -f "$BUILD/CMakeCache.txt" ]; then
  # -O1 and line tables only: the usual fuzzing trade (fast enough, readable stack traces, and a
  # much quicker build of the Boost-heavy library than -O2 -g). Tests on and MPI off: the same
  # directory serves scripts/sanitize.sh (ASAN_BUILD_DIR=build-fuzz), which only adds the test binaries.
  CC="$CC_BIN" CXX="$CXX_BIN" cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Fuzz -DCMAKE_CXX_FLAGS_FUZZ="-O1 -gline-tables-only" \
    -DPEERPLAN_FUZZ=ON -DPEERPLAN_SANITIZE=ON -DPEERPLAN_CUDA=OFF -DPEERPLAN_MPI=OFF -DPEERPLAN_BENCH=OFF >/dev/null
fi
cmake --build "$BUILD" -j "$JOBS" --target fuzzers >/dev/null

ALL=()
for bin in "$BUILD"/fuzz/fuzz_*; do ALL+=("$(basename "$bin" | sed 's/^fuzz_//')"); done
if ((LIST)); then printf '%s\n' "${ALL[@]}"; exit 0; fi
# -t alone: as many runs as fit in the time; neither: 1 M runs.
if [ -z "$RUNS" ]; then if ((SECONDS_PER_TARGET > 0)); then RUNS=-1; else RUNS=1000000; fi; fi
((${#TARGETS[@]})) || TARGETS=("${ALL[@]}")

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:allocator_may_return_null=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
status=0
for t in "${TARGETS[@]}"; do
  bin="$BUILD/fuzz/fuzz_$t"
  if [ ! -x "$bin" ]; then echo "fuzz.sh: no target '$t'; targets: ${ALL[*]}" >&2; exit 2; fi
  corpus="$BUILD/corpus/$t"; art="$BUILD/artifacts/$t"
  mkdir -p "$corpus" "$art"
  while IFS= read -r f; do [ -n "$f" ] && cp "$f" "$corpus/shipped_$(echo "$f" | tr '/' '_')"; done < <(shipped "$t")
  # Dictionary: JSON tokens for the JSON loaders, plus the target's own field names.
  mkdir -p "$BUILD/dict"
  dictfile="$BUILD/dict/$t.dict"
  : >"$dictfile"
  case "$t" in nccl_xml|lua|gguf) ;; *) cat tests/fuzz/dict/json.dict >>"$dictfile" ;; esac
  [ -f "tests/fuzz/dict/$t.dict" ] && cat "tests/fuzz/dict/$t.dict" >>"$dictfile"
  dict=()
  [ -s "$dictfile" ] && dict=(-dict="$dictfile")
  seeds=()
  for d in "tests/fuzz/seeds/$t" "tests/fuzz/regressions/$t"; do [ -d "$d" ] && seeds+=("$d"); done
  log="$BUILD/fuzz-$t.log"
  before=$(ls "$art" | grep -vc '^slow-unit-' || true)
  start=$(date +%s)
  rc=0
  mode=()
  ((KEEP_GOING)) && mode=(-fork=1 -ignore_crashes=1 -ignore_timeouts=1 -ignore_ooms=1)
  # A strategy script's calls are capped at 1 s of wall clock each (target_lua.hpp), so 5 s is a hang.
  timeout=10; [ "$t" = lua ] && timeout=5
  # -report_slow_units above -timeout: libFuzzer otherwise writes a "slow-unit-*" artifact for any unit
  # over 10 s of wall clock, and a stalled machine made one of an input that runs in 10 ms (model_config,
  # a gpt-oss config, 17 s while 3 builds shared 2 cores; 2026-12-04). A unit that really hangs is still
  # a finding: -timeout kills it and writes a "timeout-*" artifact.
  "$bin" -runs="$RUNS" -max_total_time="$SECONDS_PER_TARGET" -timeout="$timeout" -report_slow_units=100000 -rss_limit_mb=2048 -max_len=16384 -print_final_stats=1 "${mode[@]}" \
    -artifact_prefix="$art/" "${dict[@]}" "$corpus" "${seeds[@]}" >"$log" 2>&1 || rc=$?
  secs=$(( $(date +%s) - start ))
  execs=$(grep -a -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo "?")
  rate=$(grep -a -o 'stat::average_exec_per_sec: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo "?")
  cov=$(grep -a -oE 'cov: [0-9]+' "$log" | tail -1 | grep -oE '[0-9]+' || echo "?")
  # slow-unit-* files are wall-clock notes, not findings (see above); anything else is.
  found=$(( $(ls "$art" | grep -vc '^slow-unit-' || true) - before ))
  verdict="ok"
  if ((rc != 0 || found > 0)); then verdict="FINDING (see $log and $art/)"; status=1; fi
  line=$(printf '%s\t%s\t%s execs\t%s/s\t%s\t%ss\t%s\t%s\t%s' "$(date -u +%Y-%m-%dT%H:%MZ)" "$t" "$execs" "$rate" "cov=$cov" \
         "$secs" "$(ls "$corpus" | wc -l) corpus files" "$("$CXX_BIN" --version | head -1)" "$verdict")
  echo "$line"
  echo "$line" >>"$BUILD/fuzz-runs.tsv"
done
exit $status
