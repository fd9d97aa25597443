#!/usr/bin/env bash
# One device call on the 2 x H200 host that does what one GPU cannot: the single-process vs
# `mpirun -np 2 --mpi` profile comparison (issue 7) and the multi-GPU validation runs (issue 6).
# carry [".gpu-mpi", ".gpu6"]; outputs under $OUT/mpi and $OUT/validate.
set -u
OUT=${OUT:-/tmp/peerplan-out}
mkdir -p "$OUT/mpi" "$OUT/validate"
OUT=$OUT/mpi PEERPLAN_BIN=.gpu-mpi/bin/peerplan \
  WHAT=${WHAT:-launch_overhead,hbm,h2d_d2h,p2p_ce,p2p_ce_bidir,host_staged,nccl,gemm} \
  timeout 300 scripts/gpu/mpi_profile.sh 2 > "$OUT/mpi/driver.log" 2>&1
grep -E "^rc=|Wrote|rank [0-9]" "$OUT/mpi/driver.log"
# The executor under MPI with two ranks (issue 7): TP2 and PP2, against single-process runs.
if [ -x .gpu-mpi/bin/peerplan ] && [ -x scripts/gpu/validate_mpi.sh ]; then
  for plan in llama8b-tp2 llama8b-pp2; do
    OUT=$OUT/mpi/validate-$plan PEERPLAN_BIN=.gpu-mpi/bin/peerplan timeout 150 \
      scripts/gpu/validate_mpi.sh 2 docs/validation/plans/$plan.json llama-3.1-8b 40 8 > "$OUT/mpi/validate-$plan.log" 2>&1
    tail -4 "$OUT/mpi/validate-$plan.log"
  done
fi
if [ -x .gpu6/bin/peerplan ]; then
  OUT=$OUT/validate PEERPLAN_BIN=.gpu6/bin/peerplan VALIDATE_TIMEOUT=${VALIDATE_TIMEOUT:-100} \
    timeout ${VALIDATE_BUDGET:-280} scripts/gpu/validate_run.sh validate ${REQUESTS:-40} ${RATE:-8} > "$OUT/validate/driver.log" 2>&1
  tail -5 "$OUT/validate/driver.log"
fi
