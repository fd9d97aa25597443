# Sourced by the one-call device scripts (session9.sh, x2_moe_long.sh): the environment of the GPU host and the
# helpers every call uses. Set PART and OUT_DEFAULT first; the call's files go under $OUT/w$PART, its summary to
# $OUT/summary-$PART.txt, and everything into $OUT/part$PART.tgz (refreshed after each step, so a call cut short by
# its time limit still brings back what it did).
#   step SECONDS NAME CMD...   run CMD under a timeout into $W/NAME.txt; log its rc, time and last TAIL lines
#   v NAME SECONDS ARGS...     peerplan validate against this call's profile ($W/profile.json) into $W/validate-NAME
#   left SECONDS               true while the call has used less (guards the optional steps)
#   mkplan NAME LAYERS         a one-GPU plan of LAYERS layers at $W/NAME.plan.json
#   bench NAME MODEL PLAN WEIGHTS BATCHES CONTEXT [ENV...]   validate --bench-steps (decode steps) into $W/steps-NAME-*
#   finish                     compress the raw records, pack, exit
OUT=${OUT:-$OUT_DEFAULT}; W=$OUT/w$PART; mkdir -p "$W"
export NCCL_NVLS_ENABLE=0 PEERPLAN_HOME=$PWD LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
B=$PWD/.gpu/bin/peerplan; S=$OUT/summary-$PART.txt
ldd "$B" | grep -q 'not found' && export LD_LIBRARY_PATH=$LD_LIBRARY_PATH:$PWD/.gpu/lib
log() { echo "$*" | tee -a "$S"; }
step() { local t=$1 name=$2; shift 2; log "+ [$name] $*"; local t0=$(date +%s.%N)
  timeout "$t" "$@" > "$W/$name.txt" 2>&1; local rc=$?
  log "  rc=$rc $(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN{printf "%.1f", b-a}') s"
  tail -n "${TAIL:-6}" "$W/$name.txt" | sed 's/^/  | /' | tee -a "$S" >/dev/null
  tar czf "$OUT/part$PART.tgz" -C "$W" --exclude=iterations.json --exclude='*.png' . 2>/dev/null; return $rc; }
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,uuid --format=csv,noheader
  [ "$(nvidia-smi -L | wc -l)" -gt 1 ] && nvidia-smi topo -m; } | tee -a "$S"
# cuDNN (prefill attention) from PyTorch's pip package on the host.
NV=$(python3 -c "import importlib.util as u, os; print(os.path.dirname(list(u.find_spec('nvidia.cudnn').submodule_search_locations)[0]))" 2>/dev/null)
[ -n "$NV" ] && for d in "$NV"/*/lib; do export LD_LIBRARY_PATH=$LD_LIBRARY_PATH:$d; done
[ -n "$NV" ] && [ -f "$NV/cudnn/lib/libcudnn.so.9" ] && export PEERPLAN_CUDNN_LIB=$NV/cudnn/lib/libcudnn.so.9
V=docs/validation; P=$V/plans
v() { local name=$1 t=$2; shift 2
  TAIL=16 step "$t" "validate-$name" $B validate --machine "$W/profile.json" --out "$W/validate-$name" "$@"; }
left() { [ $SECONDS -lt "$1" ] || { log "  (skipped: ${SECONDS}s used)"; return 1; }; }
mkplan() { echo "{\"version\": 1, \"name\": \"single[0]\", \"strategy\": \"hand\", \"stages\": [{\"gpus\": [0], \"layer_begin\": 0, \"layer_end\": $2}]}" > "$W/$1.plan.json"; }
finish() { gzip -f "$W"/profile*.json 2>/dev/null; for f in "$W"/validate-*/iterations.json; do [ -f "$f" ] && gzip -f "$f"; done
  tar czf "$OUT/part$PART.tgz" -C "$W" --exclude=iterations.json --exclude='*.png' . 2>/dev/null
  log "done $(date -u +%FT%TZ), ${SECONDS}s"; exit 0; }
# bench: decode steps priced from this call's profile ($W/profile.json), or from MACHINE when set (another lease's or
# the shipped profile: --allow-other-host, so GPU/price is then another GPU's). WEIGHTS "-": the checkpoint's own.
bench() {  # NAME MODEL PLAN WEIGHTS BATCHES CONTEXT [ENV...]
  local name=$1 model=$2 plan=$3 wt=$4 bs=$5 ctx=$6; shift 6
  local w=(); [ "$wt" != - ] && w=(--weights "$wt")
  local m=(--machine "$W/profile.json"); [ -n "${MACHINE:-}" ] && m=(--machine "$MACHINE" --allow-other-host)
  TAIL=8 step 90 "steps-$name-$SECONDS" env "$@" $B validate --bench-steps --plan "$P/$plan" --model "$model" \
    "${w[@]}" "${m[@]}" --no-measure-missing --batches "$bs" --context "$ctx" --prefill 0 --out "$W/steps-$name-$SECONDS"
}
