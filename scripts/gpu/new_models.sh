#!/usr/bin/env bash
# Models the default profile does not time (issue 23), on one GPU, after ab_session.sh in the same call:
# the default profile of this lease, then for each model: step times, a validation priced from that
# profile (its shapes 'fitted'), `profile --model` of its shapes, and the validation priced from them.
# Also the stand-alone attention bench, old kernels vs new (carry .gpu-kb, built by bench/attention/build.sh).
#   carry [".gpu", ".gpu-kb"]; run: scripts/gpu/new_models.sh [REQUESTS] [RATE]
set -u
N=${1:-80}; RATE=${2:-6}
OUT=${OUT:-/tmp/peerplan-new}; W=$OUT/models; mkdir -p "$W"
export NCCL_NVLS_ENABLE=0 PEERPLAN_HOME=$PWD LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
B=$PWD/.gpu/bin/peerplan; WL=docs/validation/workloads/validate-chat.json; S=$OUT/models-summary.txt
log() { echo "$*" | tee -a "$S"; }
step() { local t=$1 name=$2; shift 2; log "+ [$name] $*"; local t0=$(date +%s.%N)
  timeout "$t" "$@" > "$W/$name.txt" 2>&1; local rc=$?
  log "  rc=$rc $(awk -v a="$t0" -v b="$(date +%s.%N)" "BEGIN{printf \"%.1f\", b-a}") s"
  tail -n "${TAIL:-6}" "$W/$name.txt" | sed 's/^/  | /' | tee -a "$S" >/dev/null
  tar czf "$OUT/models.tgz" -C "$W" . 2>/dev/null; }
date -u +%FT%TZ | tee -a "$S"
step 180 profile-default $B profile --no-progress --out $W/default.json
P1=docs/validation/plans/llama8b-1gpu.json
mkplan() { echo "{\"version\": 1, \"name\": \"single[0]\", \"strategy\": \"hand\", \"stages\": [{\"gpus\": [0], \"layer_begin\": 0, \"layer_end\": $2}]}" > $W/$1.plan.json; }
for spec in qwen2-7b:28 phi-3-mini:32 llama-3.2-1b:16; do m=${spec%%:*}; L=${spec##*:}; C=tests/data/model/$m.json; mkplan $m $L
  TAIL=6 step 60 steps-$m $B validate --bench-steps --plan $W/$m.plan.json --model $C --machine $W/default.json \
    --batches 1,64 --context 1024 --prefill 2048
  TAIL=16 step 120 validate-fitted-$m $B validate --plan $W/$m.plan.json --model $C --machine $W/default.json \
    --workload $WL --requests "$N" --rate "$RATE" --out $W/validate-fitted-$m
  step 120 profile-$m $B profile --model $C --no-progress --out $W/profile-$m.json
  TAIL=16 step 120 validate-measured-$m $B validate --plan $W/$m.plan.json --model $C --machine $W/profile-$m.json \
    --workload $WL --requests "$N" --rate "$RATE" --out $W/validate-measured-$m
done
if [ -x .gpu-kb/kb ]; then
  TAIL=40 step 90 kbench-new .gpu-kb/kb new 32:8:128,28:4:128,32:32:96,32:32:128,32:8:64
  [ -x .gpu-kb/kb_old ] && TAIL=40 step 90 kbench-old .gpu-kb/kb_old old
fi
log "packed $(du -h "$OUT/models.tgz" | cut -f1)"
