#!/usr/bin/env bash
# Issue 14 on one GPU, one device call (< 4 min): the kernel self-test (every executor kernel, the
# routed-MoE ones included, against CPU references), then bench/moe/run.sh: grouped-GEMM profile
# rows + HBM bandwidth, MoE decode step times of the executor beside the PyTorch reference, PASS/FAIL.
# usage: scripts/gpu/moe_check.sh [STAGED_DIR (default .gpu)]; carry [STAGED_DIR, ".gpu-ref"]; outputs under $OUT
set -u
D=${1:-.gpu}
OUT=${OUT:-/tmp/peerplan-moe}; export MOE_W=$OUT/w; mkdir -p "$MOE_W"
export NCCL_NVLS_ENABLE=0 PEERPLAN_HOME=$PWD LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
if ldd "$D/bin/peerplan" | grep -q 'not found'; then export LD_LIBRARY_PATH=$LD_LIBRARY_PATH:$PWD/$D/lib; fi
ldd "$D/bin/peerplan" | grep 'not found'
nvidia-smi --query-gpu=index,name,driver_version,memory.used,clocks.max.sm --format=csv | tee "$MOE_W/gpu.txt"
date -u +%FT%TZ | tee -a "$MOE_W/gpu.txt"
timeout 45 "$D/bin/peerplan" validate --self-test > "$MOE_W/selftest.txt" 2>&1; rc=$?
grep -E "moe_|FAIL" "$MOE_W/selftest.txt"; tail -2 "$MOE_W/selftest.txt"
echo "$( [ $rc = 0 ] && echo PASS || echo FAIL ) self-test rc=$rc ($(grep -c ' ok$' "$MOE_W/selftest.txt") kernels ok)"
bench/moe/run.sh "$D"
