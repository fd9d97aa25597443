#!/usr/bin/env bash
# Same-lease A/B of two peerplan builds on one GPU (e.g. before/after a restructuring that must not
# change behaviour): self-test, a fresh profile by each, step times, and the same single-GPU
# validation by each against the NEW build's profile of this lease; MPI smoke with the new build.
# Each step has its own timeout; outputs under $OUT (one tgz + summary.txt).
#   carry [".gpu", ".gpu-base"]; run: scripts/gpu/ab_session.sh [REQUESTS] [RATE]
set -u
N=${1:-120}; RATE=${2:-8}
OUT=${OUT:-/tmp/peerplan-ab}; W=$OUT/w; mkdir -p "$W"
export NCCL_NVLS_ENABLE=0 PEERPLAN_HOME=$PWD LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
NEW=$PWD/.gpu/bin/peerplan; OLD=$PWD/.gpu-base/bin/peerplan
P=docs/validation/plans; WL=docs/validation/workloads/validate-chat.json
S=$OUT/summary.txt
log() { echo "$*" | tee -a "$S"; }
step() { local t=$1 name=$2; shift 2; log "+ [$name] $*"; local t0=$(date +%s.%N)
  timeout "$t" "$@" > "$W/$name.txt" 2>&1; local rc=$?
  log "  rc=$rc $(awk -v a="$t0" -v b="$(date +%s.%N)" "BEGIN{printf \"%.1f\", b-a}") s"; tail -n "${TAIL:-6}" "$W/$name.txt" | sed 's/^/  | /' | tee -a "$S" >/dev/null
  tar czf "$OUT/ab.tgz" -C "$W" . 2>/dev/null; }   # re-packed after every step: a killed call still returns what ran
nvidia-smi --query-gpu=index,name,uuid,driver_version,memory.used --format=csv | tee -a "$S"
date -u +%FT%TZ | tee -a "$S"
for b in NEW OLD; do B=${!b}; [ -x "$B" ] || { log "missing $b binary $B"; continue; }
  TAIL=3 step 60 selftest-$b $B validate --self-test
  step 120 profile-$b $B profile --model llama-3.1-8b --no-progress --out $W/profile-$b.json
done
TAIL=30 step 30 profile-compare $NEW profile --compare $W/profile-OLD.json $W/profile-NEW.json
M=$W/profile-NEW.json
for b in NEW OLD; do B=${!b}; [ -x "$B" ] || continue
  TAIL=8 step 60 steps-$b $B validate --bench-steps --plan $P/llama8b-1gpu.json --model llama-3.1-8b --machine $M \
    --batches 1,64 --context 1024 --prefill 2048
  TAIL=14 step 120 validate-$b $B validate --plan $P/llama8b-1gpu.json --model llama-3.1-8b --machine $M \
    --workload $WL --requests "$N" --rate "$RATE" --out $W/validate-$b
done
for b in NEW OLD; do B=${!b}; [ -x "$B" ] || continue
  TAIL=8 step 90 steps-mixtral-$b $B validate --bench-steps --plan $P/mixtral-1gpu.json --model mixtral-8x7b --machine $M \
    --batches 1,64 --context 1024 --prefill 2048
done
TAIL=14 step 150 plan-validate-NEW $NEW plan --model llama-3.1-8b --machine $M --workload $WL --requests 60 --rate 8 \
  --validate 1 --validate-out $W/plan-validate
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
if command -v mpirun >/dev/null; then
  TAIL=10 step 120 mpi-validate-NEW mpirun -np 1 $NEW validate --mpi --plan $P/llama8b-1gpu.json --model llama-3.1-8b \
    --machine $M --workload $WL --requests 40 --rate 8 --out $W/mpi-validate
  TAIL=12 step 150 mpi-profile-share-NEW env PEERPLAN_MPI_SHARE_GPU=1 mpirun -np 2 -x PEERPLAN_MPI_SHARE_GPU $NEW profile --mpi --quick --no-progress --out $W/mpi-share.json
  TAIL=4 step 30 mpi-refusal-NEW mpirun -np 1 $NEW profile --mpi --only p2p_sm --no-progress --out $W/mpi-refused.json
fi
tar czf "$OUT/ab.tgz" -C "$W" . 2>/dev/null; log "packed $(du -h "$OUT/ab.tgz" | cut -f1)"
