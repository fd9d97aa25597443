#!/usr/bin/env bash
# Runs ON the GPU host, from the repository root, with .gpu/bin/peerplan staged by build.sh.
# Writes to $OUT (or ./gpu-out): profile-2gpu.json (all visible GPUs), profile-1gpu.json
# (CUDA_VISIBLE_DEVICES=0, compute skipped), the plots of the first, and run.txt (host facts,
# summaries, progress logs, exit codes).
# Usage: scripts/gpu/run_profile.sh [extra profile options...]
set -uo pipefail
out=${OUT:-$PWD/gpu-out}
mkdir -p "$out"
export PEERPLAN_HOME=$PWD          # shipped models/ are found from the repo root
export NCCL_NVLS_ENABLE=0          # never NVLink multicast (peerplan sets it too)
bin=$PWD/.gpu/bin/peerplan
limit=${PROFILE_TIMEOUT:-240}      # per profile run: something always comes back
# cuBLAS lives with the toolkit; libraries build.sh staged (.gpu/lib) fill any other gap.
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
if ldd "$bin" | grep -q 'not found'; then export LD_LIBRARY_PATH=$LD_LIBRARY_PATH:$PWD/.gpu/lib; fi
log=$out/run.txt
{
  date -u; uname -r; nproc
  nvidia-smi --query-gpu=name,driver_version,pci.bus_id,memory.total,clocks.max.sm --format=csv
  nvidia-smi topo -m
  ldd "$bin" | grep -E 'not found|nccl|cublas|hwloc|udev|cuda'
} > "$log" 2>&1
t0=$(date +%s.%N)
timeout "$limit" "$bin" profile --out "$out/profile-2gpu.json" --name h200x2-nvlink "$@" > "$out/s2.txt" 2> "$out/l2.txt"
rc2=$?
t1=$(date +%s.%N)
CUDA_VISIBLE_DEVICES=0 timeout "$limit" "$bin" profile --out "$out/profile-1gpu.json" --name h200x1 --skip gemm,attention "$@" \
  > "$out/s1.txt" 2> "$out/l1.txt"
rc1=$?
{
  echo "=== 2 GPUs: exit $rc2, wall $(awk "BEGIN{print $t1 - $t0}") s"; cat "$out/s2.txt"; echo "--- log"; tail -40 "$out/l2.txt"
  echo "=== 1 GPU (CUDA_VISIBLE_DEVICES=0): exit $rc1"; cat "$out/s1.txt"; echo "--- log"; tail -20 "$out/l1.txt"
} >> "$log"
rm -f "$out"/s[12].txt "$out"/l[12].txt
[ -f "$out/profile-2gpu.json" ] && python3 scripts/plot_profile.py "$out/profile-2gpu.json" --out "$out" >> "$log" 2>&1
cat "$log"
