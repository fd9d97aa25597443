#!/usr/bin/env bash
# Issue 17 on the 2 x H200 host: peer-memory one-shot / two-shot all-reduce, measured and validated.
# Prepared without a GPU (2026-12-02); binary staged here first with scripts/gpu/build.sh (.gpu/bin/peerplan).
# One script, three device calls (each must finish in 600 s), on kind nvidia-h200-x2 with carry [".gpu"]:
#   scripts/gpu/issue_17.sh kernels    # one-GPU self-test, profile with the new curves (single process
#                                      #   and mpirun -np 2 --mpi), curves vs NCCL in the same lease
#   PROFILE=<profile.json from kernels, copied into the tree> scripts/gpu/issue_17.sh validate
#                                      # TP2 Llama-3.1-8B and 70B: NCCL, custom all-reduce, P2P off
#   PROFILE=... scripts/gpu/issue_17.sh six   # the 2026-11-30 six configurations, current executor
# Everything lands in $OUT/issue17-<part>.tgz plus a summary .md (the device tool returns few files).
set -u
part=${1:?usage: issue_17.sh kernels|validate|six}
ROOT=${OUT:-/tmp/peerplan-out}
B=${PEERPLAN_BIN:-.gpu/bin/peerplan}
W=$(mktemp -d)
export NCCL_NVLS_ENABLE=0            # never NVLink multicast on a shared host
export PEERPLAN_HOME=$PWD
export LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}:/usr/local/cuda/lib64:$PWD/.gpu/lib
for d in /opt/torch/.venv/lib/python3*/site-packages/nvidia/*/lib; do [ -d "$d" ] && LD_LIBRARY_PATH=$LD_LIBRARY_PATH:$d; done
mkdir -p "$ROOT"
S=$ROOT/issue17-$part.md
run() { echo "+ $*"; local t0=$(date +%s); "$@"; local rc=$?; echo "rc=$rc wall=$(( $(date +%s) - t0 )) s"; return $rc; }
{ nvidia-smi --query-gpu=index,name,uuid,driver_version,memory.total --format=csv; nvidia-smi topo -m; } > "$W/gpus.txt" 2>&1
ldd "$B" | grep "not found" && echo "missing libraries above" | tee -a "$S"

case "$part" in
  kernels)
    # One GPU: the kernels' self-test (ranks emulated on GPU 0), every other kernel's too.
    CUDA_VISIBLE_DEVICES=0 run timeout 100 $B validate --self-test > "$W/selftest.txt" 2>&1
    { echo "## self-test on one GPU (rc above)"; grep -E "peer_allreduce|FAIL|fail" "$W/selftest.txt" | head -60; } >> "$S"
    # Two GPUs: a profile of this host with the new curves; the model shapes the validate part needs.
    run timeout 240 $B profile --only launch_overhead,hbm,p2p_ce,p2p_sm,latency_sm,nccl,nccl_nop2p,peer_allreduce,gemm,attention \
      --model llama-3.1-8b --model llama-3.1-70b --no-progress --out "$W/profile.json" > "$W/profile.log" 2>&1
    tail -3 "$W/profile.log" >> "$S"
    # Across processes (CUDA IPC handles), as engines run it.
    MPIRUN="mpirun --allow-run-as-root --oversubscribe --bind-to none -np 2 -x NCCL_NVLS_ENABLE -x LD_LIBRARY_PATH -x PEERPLAN_HOME"
    # (latency_sm has no MPI form: --mpi refuses it)
    run timeout 100 $MPIRUN $B profile --mpi --only nccl,peer_allreduce --no-progress --out "$W/profile-mpi.json" \
      > "$W/profile-mpi.log" 2>&1
    tail -3 "$W/profile-mpi.log" >> "$S"
    # One-shot / two-shot against NCCL all_reduce measured in the same lease (median us per size).
    python3 scripts/gpu/allreduce_table.py "$W/profile.json" "$W/profile-mpi.json" >> "$S"
    # Priced from the new curves: what the planner now predicts, custom against NCCL.
    P=$W/profile.json; [ -f "$P" ] || P=models/hardware/h200x2-nvlink.json
    run timeout 60 $B plan --model llama-3.1-8b --machine "$P" --allreduce nccl,custom,auto:vllm --requests 200 \
      > "$W/plan-8b.txt" 2>&1
    grep -E "ar:|All-reduce|P2P:" "$W/plan-8b.txt" | head -20 >> "$S"
    cp "$W/profile.json" "$ROOT/profile.json" 2>/dev/null ;;

  validate)
    P=${PROFILE:-}
    [ -n "$P" ] && [ -f "$P" ] || { echo "PROFILE=<this host's profile from the kernels part> is needed" | tee -a "$S"; P=models/hardware/h200x2-nvlink.json; }
    mkdir -p "$W/plans" "$W/runs"
    # The plans with the all-reduce setting; P2P off runs NCCL whatever the setting (p2p_off_variant).
    for m in llama8b llama70b; do
      python3 - docs/validation/plans/$m-tp2.json "$W/plans/$m-tp2-custom.json" <<'PY'
import json, sys
p = json.load(open(sys.argv[1])); p["allreduce"] = "custom"; p["name"] = p["name"] + " ar:custom"
json.dump(p, open(sys.argv[2], "w"), indent=2)
PY
    done
    WL=docs/validation/workloads/validate-chat.json
    v() { name=$1; shift; run timeout ${VALIDATE_TIMEOUT:-85} $B validate --workload $WL --machine "$P" --allow-other-host \
          --requests ${REQUESTS:-40} --rate ${RATE:-8} --out "$W/runs/$name" "$@" > "$W/runs/$name.txt" 2>&1; }
    v 8b-nccl       --plan docs/validation/plans/llama8b-tp2.json  --model llama-3.1-8b
    v 8b-custom     --plan "$W/plans/llama8b-tp2-custom.json"      --model llama-3.1-8b
    v 8b-p2p-off    --plan docs/validation/plans/llama8b-tp2.json  --model llama-3.1-8b --p2p off
    v 70b-nccl      --plan docs/validation/plans/llama70b-tp2.json --model llama-3.1-70b
    v 70b-custom    --plan "$W/plans/llama70b-tp2-custom.json"     --model llama-3.1-70b
    v 70b-p2p-off   --plan docs/validation/plans/llama70b-tp2.json --model llama-3.1-70b --p2p off
    { echo "## TP2 all-reduce: NCCL, custom, P2P off (targets: TTFT p50 and TPOT p50 within 5 %, E2E p99 within 10 %)"
      scripts/gpu/validate_summary.sh "$W"/runs/8b-nccl "$W"/runs/8b-custom "$W"/runs/8b-p2p-off \
        "$W"/runs/70b-nccl "$W"/runs/70b-custom "$W"/runs/70b-p2p-off; } >> "$S" 2>&1 ;;

  six)
    P=${PROFILE:-models/hardware/h200x2-nvlink.json}
    mkdir -p "$W/six"
    OUT=$W/six PROFILE=$P PEERPLAN_BIN=$B VALIDATE_TIMEOUT=${VALIDATE_TIMEOUT:-85} \
      timeout 560 scripts/gpu/validate_run.sh validate ${REQUESTS:-40} ${RATE:-8} > "$W/six/driver.log" 2>&1
    { echo "## the 2026-11-30 six configurations, current executor"; cat "$W/six/summary.md" 2>/dev/null || tail -5 "$W/six/driver.log"; } >> "$S" ;;

  *) echo "issue_17.sh: unknown part '$part' (kernels, validate or six)" >&2; exit 2 ;;
esac
cat "$S"
tar czf "$ROOT/issue17-$part.tgz" -C "$W" .
ls -la "$ROOT"
