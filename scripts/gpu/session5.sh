#!/usr/bin/env bash
# Issues 14, 15, 18 on one H200, 2026-12-03 (device tool: carry [".gpu"]; build with scripts/gpu/build.sh).
#   scripts/gpu/session5.sh K   (~5 min) every kernel's self-test (own prefill; then cuDNN's, each case
#                               named before it runs, and under compute-sanitizer when it faults); the
#                               FP8 block-scale order probe runs inside the self-test when its case
#                               fails; validate --weights int4 (the graph-scratch fix) on 40 requests.
#   scripts/gpu/session5.sh C   (~8 min) = issues_14_15_18.sh C: a fresh profile with the grouped-GEMM
#                               curves, then the four single-GPU MoE validations.
#   scripts/gpu/session5.sh F   (~4 min) quantized decode steps of Llama-3.1-8B and -70B (fp8, int4) beside
#                               a whole FP8 step in PyTorch (bench/quant/torch_fp8_step_ref.py), same lease.
#   scripts/gpu/session5.sh Z   (~8 min) the fixes of the day's first runs: self-test (FP8 block scales padded;
#                               cuDNN forced on every prefill layout), attention timed through cuDNN and the own
#                               kernel beside PyTorch SDPA, W4A16 validation from a profile with int4 GEMMs, FP8 /
#                               W4A16 decode steps beside a whole FP8 step in PyTorch, nsys of Qwen1.5-MoE decode.
#   scripts/gpu/session5.sh W   (~7 min) after the padded-batch pricing and cuDNN-by-default changes: self-test,
#                               a fresh profile (8B, Mixtral, Qwen1.5-MoE), MoE and long-prompt validations.
#   scripts/gpu/session5.sh L   (~8 min) long context (issue 18): a fresh profile of Llama-3.1-8B's shapes (the
#                               2-D attention grid to 128k, its held-back errors), then validate under
#                               64k-100k-token prompts and under 8k-32k.
# Outputs under $OUT (summary-*.txt and a tgz of the raw files).
set -u
PART=${1:-K}
if [ "$PART" = C ]; then exec scripts/gpu/issues_14_15_18.sh C; fi
OUT=${OUT:-/tmp/peerplan-s5}; W=$OUT/w$PART; mkdir -p "$W"
export NCCL_NVLS_ENABLE=0 PEERPLAN_HOME=$PWD LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
B=$PWD/.gpu/bin/peerplan; S=$OUT/summary-$PART.txt
ldd "$B" | grep -q 'not found' && export LD_LIBRARY_PATH=$LD_LIBRARY_PATH:$PWD/.gpu/lib
log() { echo "$*" | tee -a "$S"; }
step() { local t=$1 name=$2; shift 2; log "+ [$name] $*"; local t0=$(date +%s.%N)
  timeout "$t" "$@" > "$W/$name.txt" 2>&1; local rc=$?
  log "  rc=$rc $(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN{printf "%.1f", b-a}') s"
  tail -n "${TAIL:-6}" "$W/$name.txt" | sed 's/^/  | /' | tee -a "$S" >/dev/null
  tar czf "$OUT/part$PART.tgz" -C "$W" . 2>/dev/null; return $rc; }
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,uuid --format=csv,noheader; } | tee -a "$S"
V=docs/validation; P=$V/plans; M=models/hardware/h200x2-nvlink.json
cudnn_env() {
  NV=$(python3 -c "import importlib.util as u, os; print(os.path.dirname(list(u.find_spec('nvidia.cudnn').submodule_search_locations)[0]))" 2>/dev/null)
  [ -n "$NV" ] && for d in "$NV"/*/lib; do export LD_LIBRARY_PATH=$LD_LIBRARY_PATH:$d; done
  [ -n "$NV" ] && [ -f "$NV/cudnn/lib/libcudnn.so.9" ] && export PEERPLAN_CUDNN_LIB=$NV/cudnn/lib/libcudnn.so.9
}
if [ "$PART" = W ]; then
  cudnn_env
  TAIL=3 step 120 profile $B profile --no-progress --model llama-3.1-8b --model mixtral-8x7b --model qwen1.5-moe-a2.7b \
    --dtypes bf16 --skip nccl,nccl_nop2p --out "$W/profile.json"
  v() { local name=$1 t=$2; shift 2
    TAIL=14 step "$t" "validate-$name" $B validate --machine "$W/profile.json" --out "$W/validate-$name" "$@"; }
  v qwen-moe-chat 60 --plan $P/qwen-moe-1gpu.json --model qwen1.5-moe-a2.7b --workload $V/workloads/validate-chat.json --requests 80
  v llama8b-8k-32k 90 --plan $P/llama8b-1gpu.json --model llama-3.1-8b --workload models/workloads/long-prompt-8k-32k.json --requests 24
  [ $SECONDS -lt 150 ] && v mixtral-long 80 --plan $P/mixtral-1gpu.json --model mixtral-8x7b --workload $V/workloads/validate-long-prompt.json
  [ $SECONDS -lt 200 ] && v llama8b-64k-100k 200 --plan $P/llama8b-1gpu.json --model llama-3.1-8b --workload models/workloads/long-prompt-64k-100k.json
  [ $SECONDS -lt 300 ] && v qwen-moe-long 60 --plan $P/qwen-moe-1gpu.json --model qwen1.5-moe-a2.7b --workload $V/workloads/validate-long-prompt.json
  gzip -f "$W/profile.json"; tar czf "$OUT/part$PART.tgz" -C "$W" . 2>/dev/null; log "done $(date -u +%FT%TZ), ${SECONDS}s"; exit 0
fi
if [ "$PART" = Z ]; then
  cudnn_env
  TAIL=2 step 60 selftest $B validate --self-test
  grep -E "fp8_block|probe|FAIL" "$W/selftest.txt" | head -8 | sed 's/^/  | /' | tee -a "$S" >/dev/null
  PEERPLAN_PREFILL_ATTENTION=cudnn TAIL=2 step 60 selftest-cudnn $B validate --self-test
  grep -E "prefill_attention\[cudnn\]|FAIL" "$W/selftest-cudnn.txt" | awk '{print $NF}' | sort | uniq -c | sed 's/^/  | cudnn rows: /' | tee -a "$S" >/dev/null
  grep -E "FAIL|failed" "$W/selftest-cudnn.txt" | head -4 | sed 's/^/  | /' | tee -a "$S" >/dev/null
  for be in cudnn own auto; do
    PEERPLAN_PREFILL_ATTENTION=$be TAIL=1 step 60 attn-$be $B profile --no-progress --only attention --model llama-3.1-8b --out "$W/attn-$be.json"
  done
  TAIL=8 step 60 torch-attn python3 .gpu-ref/torch_attn_ref.py "$W"
  TAIL=2 step 120 profile-int4 $B profile --no-progress --only launch_overhead,hbm,gemm,attention --model llama-3.1-8b --dtypes bf16,int4 --out "$W/profile-int4.json"
  TAIL=16 step 90 validate-8b-int4 $B validate --machine "$W/profile-int4.json" --plan $P/llama8b-1gpu.json \
    --model llama-3.1-8b --weights int4 --workload $V/workloads/validate-chat.json --requests 60 --out "$W/validate-8b-int4"
  for mw in "8b --weights fp8" "8b --weights int4" "70b --weights fp8"; do set -- $mw
    [ $SECONDS -gt 420 ] && { log "skip steps $1 $3 (time)"; continue; }
    TAIL=7 step 120 "steps-$1-${3}" $B validate --bench-steps --plan $P/llama$1-1gpu.json --model llama-3.1-$1 \
      --machine $M --allow-other-host --batches 1,8,32,64 --context 1024 --prefill 2048 $2 $3
  done
  [ $SECONDS -lt 440 ] && TAIL=3 step 100 torch-fp8-step python3 bench/quant/torch_fp8_step_ref.py "$W" llama-3.1-8b llama-3.1-70b
  NS=$(command -v nsys || ls /usr/local/cuda*/bin/nsys /opt/nvidia/nsight-systems*/bin/nsys 2>/dev/null | head -1)
  log "nsys: ${NS:-none}"
  if [ -n "$NS" ] && [ $SECONDS -lt 480 ]; then
    TAIL=2 step 60 nsys-qwen "$NS" profile -o "$W/qwen" --cuda-graph-trace=node --force-overwrite true $B validate --bench-steps \
      --plan $P/qwen-moe-1gpu.json --model qwen1.5-moe-a2.7b --machine $M --allow-other-host --batches 1,8 --context 1024 --prefill 0
    TAIL=60 step 40 nsys-qwen-stats "$NS" stats --report cuda_gpu_kern_sum --format csv "$W/qwen.nsys-rep"
    rm -f "$W/qwen.nsys-rep" "$W/qwen.sqlite"
  fi
  for f in "$W"/*.json; do gzip -f "$f"; done
  tar czf "$OUT/part$PART.tgz" -C "$W" . 2>/dev/null; log "done $(date -u +%FT%TZ), ${SECONDS}s"; exit 0
fi
if [ "$PART" = L ]; then
  NV=$(python3 -c "import importlib.util as u, os; print(os.path.dirname(list(u.find_spec('nvidia.cudnn').submodule_search_locations)[0]))" 2>/dev/null)
  [ -n "$NV" ] && for d in "$NV"/*/lib; do export LD_LIBRARY_PATH=$LD_LIBRARY_PATH:$d; done
  [ -n "$NV" ] && [ -f "$NV/cudnn/lib/libcudnn.so.9" ] && export PEERPLAN_CUDNN_LIB=$NV/cudnn/lib/libcudnn.so.9
  # cuDNN's prefill only when its self-test passes here (then the profile times it and validate runs it).
  if PEERPLAN_PREFILL_ATTENTION=auto TAIL=3 step 60 selftest-cudnn $B validate --self-test; then
    export PEERPLAN_PREFILL_ATTENTION=auto; log "prefill attention: cuDNN (auto)"
  else log "prefill attention: own kernel (cuDNN self-test failed)"; fi
  grep -cE "prefill_attention\[cudnn\].* ok" "$W/selftest-cudnn.txt" | sed 's/^/  cudnn ok rows: /' | tee -a "$S"
  grep -E "FAIL" "$W/selftest-cudnn.txt" | head -5 | sed 's/^/  | /' | tee -a "$S" >/dev/null
  TAIL=12 step 120 torch-attn python3 .gpu-ref/torch_attn_ref.py "$W"
  TAIL=4 step 150 profile $B profile --no-progress --model llama-3.1-8b --dtypes bf16 --skip nccl,nccl_nop2p --out "$W/profile.json"
  grep -E "attention grid" "$W/profile.txt" | sed 's/^/  | /' | tee -a "$S" >/dev/null
  TAIL=18 step 330 validate-8b-64k-100k $B validate --machine "$W/profile.json" --plan $P/llama8b-1gpu.json \
    --model llama-3.1-8b --workload models/workloads/long-prompt-64k-100k.json --out "$W/validate-8b-64k-100k"
  TAIL=18 step 120 validate-8b-8k-32k $B validate --machine "$W/profile.json" --plan $P/llama8b-1gpu.json \
    --model llama-3.1-8b --workload models/workloads/long-prompt-8k-32k.json --requests 24 --out "$W/validate-8b-8k-32k"
  gzip -f "$W/profile.json"; tar czf "$OUT/part$PART.tgz" -C "$W" . 2>/dev/null; log "done $(date -u +%FT%TZ), ${SECONDS}s"; exit 0
fi
if [ "$PART" = F ]; then
  for mw in "8b --weights fp8" "8b --weights int4" "70b --weights fp8"; do set -- $mw
    TAIL=8 step 150 "steps-$1-${3}" $B validate --bench-steps --plan $P/llama$1-1gpu.json --model llama-3.1-$1 \
      --machine $M --allow-other-host --batches 1,8,32,64 --context 1024 --prefill 2048 $2 $3
  done
  TAIL=4 step 200 torch-fp8-step python3 bench/quant/torch_fp8_step_ref.py "$W"
  tar czf "$OUT/part$PART.tgz" -C "$W" . 2>/dev/null; log "done $(date -u +%FT%TZ), ${SECONDS}s"; exit 0
fi
TAIL=3 step 90 selftest $B validate --self-test
grep -E "fp8_block|probe|w4a16|int4|FAIL" "$W/selftest.txt" | head -20 | sed 's/^/  | /' | tee -a "$S" >/dev/null
NV=$(python3 -c "import importlib.util as u, os; print(os.path.dirname(list(u.find_spec('nvidia.cudnn').submodule_search_locations)[0]))" 2>/dev/null)
[ -n "$NV" ] && for d in "$NV"/*/lib; do export LD_LIBRARY_PATH=$LD_LIBRARY_PATH:$d; done
[ -n "$NV" ] && [ -f "$NV/cudnn/lib/libcudnn.so.9" ] && export PEERPLAN_CUDNN_LIB=$NV/cudnn/lib/libcudnn.so.9
# Each prefill case alone through cuDNN (a fault ends the process): which layouts run (0: one sequence,
# dense K/V; 1: one sequence through a slot table; 2..: several sequences, ragged Q, paged or dense K/V).
for i in $(seq 0 15); do
  PEERPLAN_SELFTEST_PREFILL_CASE=$i PEERPLAN_PREFILL_ATTENTION=cudnn timeout 60 $B validate --self-test > "$W/cudnn-case-$i.txt" 2>&1
  log "  cudnn case $i rc=$? $(grep -E 'prefill case|prefill_attention|error|failed' "$W/cudnn-case-$i.txt" | tr '\n' ' ' | cut -c1-300)"
done
if ! PEERPLAN_PREFILL_ATTENTION=auto TAIL=8 step 90 selftest-cudnn $B validate --self-test; then
  CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
  log "compute-sanitizer: ${CS:-none}"
  [ -n "$CS" ] && PEERPLAN_PREFILL_ATTENTION=auto TAIL=40 step 150 selftest-cudnn-sanitizer "$CS" --print-limit 4 \
      $B validate --self-test
fi
TAIL=18 step 120 validate-8b-int4 $B validate --machine $M --allow-other-host --plan $P/llama8b-1gpu.json \
  --model llama-3.1-8b --weights int4 --workload $V/workloads/validate-chat.json --requests 40 --out "$W/validate-8b-int4"
tar czf "$OUT/part$PART.tgz" -C "$W" . 2>/dev/null
log "done $(date -u +%FT%TZ), ${SECONDS}s"
