#!/usr/bin/env bash
# The executor under MPI against the single-process executor, on the GPU host, with one fresh
# profile for both: `mpirun -np N peerplan validate --mpi` (one process per GPU) and `peerplan
# validate` of the same plan, requests and rate; plus the launch refusals (exit 2).
# usage: scripts/gpu/validate_mpi.sh [NP] [PLAN] [MODEL] [REQUESTS] [RATE]
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
  t0=$(date +%s.%N)
  timeout 90 $B profile --model "$MODEL" --no-progress --out $R/profile.json > $R/profile.log 2>&1
  echo "profile rc=$? $(awk "BEGIN{print $(date +%s.%N) - $t0}") s"
  M=$R/profile.json; [ -f $M ] || M=models/hardware/h200x2-nvlink.json
  A="--workload $W --machine $M --allow-other-host --requests $N --rate $RATE --plan $PLAN --model $MODEL"
  v() { local name=$1; shift; echo "+ $name: $*"; local t=$(date +%s.%N)
    timeout 100 "$@" --out $R/$name > $R/$name.txt 2>&1; echo "rc=$? wall $(awk "BEGIN{print $(date +%s.%N) - $t}") s" >> $R/$name.txt
    cat $R/$name.txt; }
  v single $B validate $A
  v mpi$NP $MPI $B validate --mpi $A
  v single-again $B validate $A   # run-to-run spread of the single-process path on the same profile
  echo "+ refusals (expect rc=2)"
  timeout 30 $MPI $B validate $A > $R/refuse-no-mpi.txt 2>&1; echo "no --mpi under mpirun: rc=$?"; head -2 $R/refuse-no-mpi.txt
  timeout 30 mpirun --allow-run-as-root -np 1 $B validate --mpi $A --plan docs/validation/plans/llama8b-tp2.json \
    > $R/refuse-tp2-np1.txt 2>&1; echo "TP2 plan with -np 1: rc=$?"; head -2 $R/refuse-tp2-np1.txt
} 2>&1 | tee $R/console.txt
tar cf "$OUT/mpi-runs.tar" -C $R .
cp $R/console.txt "$OUT/"
