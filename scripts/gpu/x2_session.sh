#!/usr/bin/env bash
# Device calls on the 2 x H200 host that do what one GPU cannot, with one binary built from main
# (scripts/gpu/build.sh, then copy .gpu/* to .gpu-mpi/); carry [".gpu-mpi"]. Two parts, one device
# call each (a call may run 10 minutes):
#   scripts/gpu/x2_session.sh mpi     # issue 7: single-process vs `mpirun -np 2 --mpi` profiles,
#                                     #   split-hosts run, refusal, validate --mpi for TP2 and PP2
#   scripts/gpu/x2_session.sh validate  # issue 6: the six configurations with the current executor,
#                                     #   then step times (8B 1 GPU / TP2, 70B TP2) vs the PyTorch bar
# Everything is packed into $OUT/x2-<part>.tgz at the end (the device tool returns at most 8
# files); the console shows the summary lines.
set -u
part=${1:?usage: x2_session.sh mpi|validate}
ROOT=${OUT:-/tmp/peerplan-out}
B=${PEERPLAN_BIN:-.gpu-mpi/bin/peerplan}
W=$(mktemp -d)
case "$part" in
  mpi)
    mkdir -p "$W/mpi"
    OUT=$W/mpi PEERPLAN_BIN=$B WHAT=${WHAT:-launch_overhead,hbm,h2d_d2h,p2p_ce,p2p_ce_bidir,host_staged,nccl,gemm} \
      timeout 300 scripts/gpu/mpi_profile.sh 2 > "$W/mpi/driver.log" 2>&1
    grep -E "^rc=|Wrote|rank [0-9]|expect" "$W/mpi/driver.log"
    for plan in llama8b-tp2 llama8b-pp2; do
      OUT=$W/mpi/validate-$plan PEERPLAN_BIN=$B timeout 120 \
        scripts/gpu/validate_mpi.sh 2 docs/validation/plans/$plan.json llama-3.1-8b 40 8 > "$W/mpi/validate-$plan.log" 2>&1
      grep -E "^\+|ttft_p50|tpot_p50|e2e_p99|rc=" "$W/mpi/validate-$plan.log" | head -20
    done ;;
  validate)
    mkdir -p "$W/validate" "$W/steps"
    OUT=$W/validate PEERPLAN_BIN=$B VALIDATE_TIMEOUT=${VALIDATE_TIMEOUT:-100} \
      timeout ${VALIDATE_BUDGET:-330} scripts/gpu/validate_run.sh validate ${REQUESTS:-40} ${RATE:-8} > "$W/validate/driver.log" 2>&1
    cat "$W/validate/summary.md" 2>/dev/null || tail -5 "$W/validate/driver.log"
    P=$W/validate/profile.json; [ -f "$P" ] || P=models/hardware/h200x2-nvlink.json
    PROFILE=$P OUT=$W/steps PEERPLAN_BIN=$B timeout ${STEPS_BUDGET:-200} \
      scripts/gpu/validate_run.sh steps > "$W/steps/driver.log" 2>&1
    grep -E "step times|decode|prefill|all kernels" "$W/steps/driver.log" | tail -14 ;;
  *) echo "x2_session.sh: unknown part '$part' (mpi or validate)" >&2; exit 2 ;;
esac
mkdir -p "$ROOT"
tar czf "$ROOT/x2-$part.tgz" -C "$W" .
ls -la "$ROOT"
