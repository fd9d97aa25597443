#!/usr/bin/env bash
# The executor under MPI against the single-process executor, on the GPU host, with one fresh
# profile for both: `mpirun -np N peerplan validate --mpi` (one process per GPU) and `peerplan
# validate` of the same plan, requests and rate; plus the launch refusals (exit 2).
# usage: scripts/gpu/validate_mpi.sh [NP] [PLAN] [MODEL] [REQUESTS] [RATE]
# env: PROFILE=file (skip measuring one), RUNS="single mpi again share refusals" (default all but
# share; share = smoke test on a one-GPU machine: -np 2 with PEERPLAN_MPI_SHARE_GPU=1, rank 1 an
# idle follower of a one-GPU plan, so the message flow with a real follower runs without NCCL)
# Binary: $PEERPLAN_BIN (default .gpu-exec-mpi/bin/peerplan, carried). Results: $OUT/mpi-runs.tar
set -u
NP=${1:-1}
PLAN=${2:-docs/validation/plans/llama8b-1gpu.json}
MODEL=${3:-llama-3.1-8b}
N=${4:-40}
RATE=${5:-8}
B=${PEERPLAN_BIN:-.gpu-exec-mpi/bin/peerplan}
OUT=${OUT:-/tmp/peerplan-out}
W=docs/validation/workloads/validate-chat.json
mkdir -p "$OUT"
export NCCL_NVLS_ENABLE=0 PEERPLAN_HOME=$PWD
export LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}:/usr/local/cuda/lib64:$PWD/$(dirname "$B")/../lib
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
MPI="mpirun --allow-run-as-root --bind-to none -np $NP -x NCCL_NVLS_ENABLE -x PEERPLAN_HOME -x LD_LIBRARY_PATH"
R=/tmp/mpi-runs; mkdir -p $R
{
  date -u; nvidia-smi --query-gpu=index,name,driver_version,memory.used --format=csv; mpirun --version | head -1
  ldd "$B" | grep -i "not found"
  if [ -z "${PROFILE:-}" ]; then
    t0=$(date +%s.%N)
    timeout 90 $B profile --model "$MODEL" --no-progress --out $R/profile.json > $R/profile.log 2>&1
    echo "profile rc=$? $(awk "BEGIN{print $(date +%s.%N) - $t0}") s"
    M=$R/profile.json; [ -f $M ] || M=models/hardware/h200x2-nvlink.json
  else
    M=$PROFILE
  fi
  RUNS=${RUNS:-single mpi again refusals}
  has() { case " $RUNS " in *" $1 "*) return 0;; esac; return 1; }
  C="--workload $W --machine $M --allow-other-host --requests $N --rate $RATE --model $MODEL"
  A="$C --plan $PLAN"
  v() { local name=$1; shift; echo "+ $name: $*"; local t=$(date +%s.%N)
    timeout 100 "$@" --out $R/$name > $R/$name.txt 2>&1; echo "rc=$? wall $(awk "BEGIN{print $(date +%s.%N) - $t}") s" >> $R/$name.txt
    cat $R/$name.txt; }
  has single && v single $B validate $A
  has mpi && v mpi$NP $MPI $B validate --mpi $A
  has again && v single-again $B validate $A   # run-to-run spread of the single-process path, same profile
  has share && v mpi2-share mpirun --allow-run-as-root --bind-to none --oversubscribe -np 2 -x NCCL_NVLS_ENABLE \
    -x PEERPLAN_HOME -x LD_LIBRARY_PATH -x PEERPLAN_MPI_SHARE_GPU=1 $B validate --mpi $A
  if has refusals; then
    echo "+ refusals (expect rc=2)"
    # Two ranks without --mpi (a one-rank launch without --mpi is an ordinary single process).
    timeout 30 mpirun --allow-run-as-root --oversubscribe -np 2 $B validate $A > $R/refuse-no-mpi.txt 2>&1
    echo "-np 2 without --mpi: rc=$?"; head -2 $R/refuse-no-mpi.txt
    timeout 30 mpirun --allow-run-as-root -np 1 $B validate --mpi $C --plan docs/validation/plans/llama8b-tp2.json \
      > $R/refuse-tp2-np1.txt 2>&1; echo "TP2 plan with -np 1: rc=$?"; head -2 $R/refuse-tp2-np1.txt
  fi
} 2>&1 | tee $R/console.txt
tar cf "$OUT/mpi-runs.tar" -C $R .
cp $R/console.txt "$OUT/"
