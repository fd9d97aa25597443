#!/usr/bin/env bash
# One H200, 2026-12-03 (sixth session; device tool: carry [".gpu", ".gpu-ref"]; build with scripts/gpu/build.sh).
#   scripts/gpu/session6.sh S  (~9 min) self-test (decode's cluster rule changed), the attention study grid
#                              (PEERPLAN_ATTENTION_GRID=study, Llama-3.1-8B's heads, cuDNN prefill), then
#                              session5.sh W (fresh profile, MoE and long-prompt validations with cuDNN and
#                              the padded decode pricing), then profile --add-model on W's profile (issue 23).
#   scripts/gpu/session6.sh V  (~9 min) after the cuDNN warm-up and the half-octave grid: self-test, a fresh
#                              profile, 8B 8k-32k, Mixtral long, 8B 64k-100k, Qwen1.5-MoE long validations.
# Outputs under $OUT (summary-*.txt and a tgz of the raw files).
set -u
PART=${1:-S}
OUT=${OUT:-/tmp/peerplan-s6}; W=$OUT/w$PART; mkdir -p "$W"
export NCCL_NVLS_ENABLE=0 PEERPLAN_HOME=$PWD LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
B=$PWD/.gpu/bin/peerplan; S=$OUT/summary-$PART.txt
ldd "$B" | grep -q 'not found' && export LD_LIBRARY_PATH=$LD_LIBRARY_PATH:$PWD/.gpu/lib
log() { echo "$*" | tee -a "$S"; }
step() { local t=$1 name=$2; shift 2; log "+ [$name] $*"; local t0=$(date +%s.%N)
  timeout "$t" "$@" > "$W/$name.txt" 2>&1; local rc=$?
  log "  rc=$rc $(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN{printf "%.1f", b-a}') s"
  tail -n "${TAIL:-6}" "$W/$name.txt" | sed 's/^/  | /' | tee -a "$S" >/dev/null
  tar czf "$OUT/part$PART.tgz" -C "$W" . 2>/dev/null; return $rc; }
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,uuid --format=csv,noheader; } | tee -a "$S"
NV=$(python3 -c "import importlib.util as u, os; print(os.path.dirname(list(u.find_spec('nvidia.cudnn').submodule_search_locations)[0]))" 2>/dev/null)
[ -n "$NV" ] && for d in "$NV"/*/lib; do export LD_LIBRARY_PATH=$LD_LIBRARY_PATH:$d; done
[ -n "$NV" ] && [ -f "$NV/cudnn/lib/libcudnn.so.9" ] && export PEERPLAN_CUDNN_LIB=$NV/cudnn/lib/libcudnn.so.9
if [ "$PART" = S ]; then
  TAIL=2 step 60 selftest $B validate --self-test
  grep -E "decode|FAIL" "$W/selftest.txt" | grep -E "FAIL|mismatch" | head -6 | sed 's/^/  | /' | tee -a "$S" >/dev/null
  PEERPLAN_ATTENTION_GRID=study TAIL=2 step 200 study $B profile --no-progress --only attention --model llama-3.1-8b \
    --samples 10 --warmup 2 --out "$W/study.json"
  gzip -f "$W/study.json"
  OUT=$OUT timeout 400 scripts/gpu/session5.sh W
  if [ -f "$OUT/wW/profile.json.gz" ] && [ $SECONDS -lt 540 ]; then
    zcat "$OUT/wW/profile.json.gz" > "$W/host.json"
    TAIL=6 step 50 add-model $B profile --no-progress --add-model mistral-7b --machine "$W/host.json" --out "$W/host-added.json"
    python3 -c "import json,sys; m=json.load(open(sys.argv[1]))['meta']; print('added_shapes:', json.dumps(m.get('added_shapes'))[:600])" "$W/host-added.json" | tee -a "$S"
    rm -f "$W/host.json"; gzip -f "$W/host-added.json"
  fi
  tar czf "$OUT/part$PART.tgz" -C "$W" . 2>/dev/null; log "done $(date -u +%FT%TZ), ${SECONDS}s"; exit 0
fi
if [ "$PART" = V ]; then
  # After the cuDNN graph warm-up (bucketed sequence counts) and the half-octave attention grid.
  TAIL=2 step 60 selftest $B validate --self-test
  grep -E "FAIL|mismatch" "$W/selftest.txt" | head -6 | sed 's/^/  | /' | tee -a "$S" >/dev/null
  grep -E "prefill_attention" "$W/selftest.txt" | awk '{print $NF}' | sort | uniq -c | sed 's/^/  | prefill rows: /' | tee -a "$S" >/dev/null
  TAIL=3 step 150 profile $B profile --no-progress --model llama-3.1-8b --model mixtral-8x7b --model qwen1.5-moe-a2.7b \
    --dtypes bf16 --skip nccl,nccl_nop2p --out "$W/profile.json"
  grep -E "attention grid" "$W/profile.txt" | sed 's/^/  | /' | tee -a "$S" >/dev/null
  V=docs/validation; P=$V/plans
  v() { local name=$1 t=$2; shift 2
    TAIL=16 step "$t" "validate-$name" $B validate --machine "$W/profile.json" --out "$W/validate-$name" "$@"; }
  v llama8b-8k-32k 90 --plan $P/llama8b-1gpu.json --model llama-3.1-8b --workload models/workloads/long-prompt-8k-32k.json --requests 24
  v mixtral-long 80 --plan $P/mixtral-1gpu.json --model mixtral-8x7b --workload $V/workloads/validate-long-prompt.json
  [ $SECONDS -lt 330 ] && v llama8b-64k-100k 180 --plan $P/llama8b-1gpu.json --model llama-3.1-8b --workload models/workloads/long-prompt-64k-100k.json
  [ $SECONDS -lt 500 ] && v qwen-moe-long 60 --plan $P/qwen-moe-1gpu.json --model qwen1.5-moe-a2.7b --workload $V/workloads/validate-long-prompt.json
  gzip -f "$W/profile.json"; tar czf "$OUT/part$PART.tgz" -C "$W" . 2>/dev/null; log "done $(date -u +%FT%TZ), ${SECONDS}s"; exit 0
fi
echo "unknown part $PART" >&2; exit 2
