#!/usr/bin/env bash
# Runs on the GPU host (see .library/device): the same host profiled by one process and by
# `mpirun -np N ... --mpi` (one rank per GPU), plus an MPI run that treats every rank as its own
# host (exercises the network path: NCCL send/recv between ranks). Compare the two profiles here
# with `peerplan profile --compare single.json mpi.json`.
# usage: scripts/gpu/mpi_profile.sh [N]     binary: $PEERPLAN_BIN (default .gpu-mpi/bin/peerplan)
set -u
N=${1:-$(nvidia-smi -L | wc -l)}
B=${PEERPLAN_BIN:-.gpu-mpi/bin/peerplan}
OUT=${OUT:-/tmp/peerplan-out}
mkdir -p "$OUT"
export NCCL_NVLS_ENABLE=0            # never NVLink multicast on a shared host
export PEERPLAN_HOME=$PWD
export LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}:/usr/local/cuda/lib64
for d in /opt/torch/.venv/lib/python3*/site-packages/nvidia/*/lib; do [ -d "$d" ] && LD_LIBRARY_PATH=$LD_LIBRARY_PATH:$d; done
{ nvidia-smi --query-gpu=index,name,uuid,driver_version --format=csv; mpirun --version | head -1; ldd "$B" | grep -E "mpi|not found"; } 2>&1 | tee "$OUT/env.txt"
# SHARE=1: more ranks than GPUs (smoke test of the cross-process paths on a one-GPU machine).
XSHARE=""
if [ "${SHARE:-0}" = 1 ]; then export PEERPLAN_MPI_SHARE_GPU=1; XSHARE="-x PEERPLAN_MPI_SHARE_GPU"; fi
MPIRUN="mpirun $XSHARE --allow-run-as-root --oversubscribe --bind-to none -np $N -x NCCL_NVLS_ENABLE -x LD_LIBRARY_PATH -x PEERPLAN_HOME"
WHAT=${WHAT:-launch_overhead,hbm,h2d_d2h,p2p_ce,host_staged,nccl,gemm}
run() { echo "+ $*"; local t0=$(date +%s%N); "$@"; local rc=$?; echo "rc=$rc wall=$(( ($(date +%s%N) - t0) / 1000000 )) ms"; }
run timeout 240 $B profile --only "$WHAT" --model llama-3.1-8b --no-progress --out "$OUT/single.json" > "$OUT/single.log" 2>&1
tail -3 "$OUT/single.log"
run timeout 240 $MPIRUN $B profile --mpi --only "$WHAT" --model llama-3.1-8b --no-progress --out "$OUT/mpi.json" > "$OUT/mpi.log" 2>&1
tail -3 "$OUT/mpi.log"
run timeout 120 $MPIRUN $B profile --mpi --mpi-split-hosts --only p2p_ce,nccl --quick --no-progress --out "$OUT/mpi-split.json" > "$OUT/mpi-split.log" 2>&1
tail -3 "$OUT/mpi-split.log"
# The guard: an MPI launch without --mpi must refuse (exit 2), not profile twice at once.
$MPIRUN $B profile --quick --out "$OUT/refused.json" > "$OUT/refused.log" 2>&1; echo "without --mpi: rc=$? (expect 2)"; head -2 "$OUT/refused.log"
ls -la "$OUT"
