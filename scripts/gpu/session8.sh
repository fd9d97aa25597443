#!/usr/bin/env bash
# One H200 per call, 2026-12-04 (eighth session; device tool: carry [".gpu", ".gpu-ref"]; build with scripts/gpu/build.sh,
# bench/quant/build.sh .gpu/bin/qb). .gpu-ref holds the shared PyTorch references and traces/azure-conv.json.
#   scripts/gpu/session8.sh A  (~9 min) issue 15 and the gemv shapes: self-test (moe: every gemv shape), qb (the
#                              W4A16 GEMV at batch 1 against packed bytes / HBM), a profile of Llama-3.1-8B and -70B in
#                              bf16/fp8/int4, validations 8B W4A16 and 70B FP8 on one GPU, then the dense 8B step beside
#                              ../shared/reference/torch_ref.py (after the rotary rewrite).
#   scripts/gpu/session8.sh B  (~8 min) a fresh profile (bf16 + fp8), Mixtral decode steps with the gemv's new default
#                              shapes, validations: Llama-3.1-8B on the Azure conversation trace (issue 23: a second
#                              lease), 8B FP8 on chat (issue 15), 8B 64k-100k (issue 18, with the two-chunk pricing).
#   scripts/gpu/session8.sh C  (~5 min) the MLA kernels' self-test and bench (.gpu/bin/mla_bench), qb's W4A16 variants
#                              over rotating weights (the fastest passing variant is used for the rest of the call), a
#                              profile with graph-timed quantized rows and decode rows at every graph batch / launch step,
#                              validations 8B FP8 and W4A16 on chat.
#   scripts/gpu/session8.sh D  (~8 min) the session's last call: MLA self-test, a profile of Llama-3.1-8B (bf16/fp8/int4),
#                              Qwen1.5-MoE and DeepSeek-V2-Lite with the elementwise table and graph-timed decode
#                              attention, DeepSeek-V2-Lite decode steps, validations: Qwen1.5-MoE long, DeepSeek-V2-Lite
#                              chat, 8B FP8 and W4A16 chat, 8B Azure conv.
#   scripts/gpu/session8.sh E  (~4 min) bf16 GEMM rows at decode sizes graph-timed over rotating weights: a profile, then
#                              Qwen1.5-MoE long, Llama-3.1-8B Azure conv and 8B FP8 chat.
#   scripts/gpu/session8.sh F  (~4 min) the changed kernels beside the PyTorch references in one lease: the routed MoE
#                              decode step (gemv's new default shapes) beside torch._grouped_mm (bench/moe/run.sh), and
#                              the 8B FP8 / W4A16 (v5) decode steps beside a whole FP8 step in PyTorch.
# Outputs under $OUT (summary-*.txt and a tgz of the raw files).
set -u
PART=${1:-A}
OUT=${OUT:-/tmp/peerplan-s8}; W=$OUT/w$PART; mkdir -p "$W"
export NCCL_NVLS_ENABLE=0 PEERPLAN_HOME=$PWD LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
B=$PWD/.gpu/bin/peerplan; S=$OUT/summary-$PART.txt
ldd "$B" | grep -q 'not found' && export LD_LIBRARY_PATH=$LD_LIBRARY_PATH:$PWD/.gpu/lib
log() { echo "$*" | tee -a "$S"; }
step() { local t=$1 name=$2; shift 2; log "+ [$name] $*"; local t0=$(date +%s.%N)
  timeout "$t" "$@" > "$W/$name.txt" 2>&1; local rc=$?
  log "  rc=$rc $(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN{printf "%.1f", b-a}') s"
  tail -n "${TAIL:-6}" "$W/$name.txt" | sed 's/^/  | /' | tee -a "$S" >/dev/null
  tar czf "$OUT/part$PART.tgz" -C "$W" --exclude=iterations.json --exclude='*.png' . 2>/dev/null; return $rc; }
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,uuid --format=csv,noheader; } | tee -a "$S"
NV=$(python3 -c "import importlib.util as u, os; print(os.path.dirname(list(u.find_spec('nvidia.cudnn').submodule_search_locations)[0]))" 2>/dev/null)
[ -n "$NV" ] && for d in "$NV"/*/lib; do export LD_LIBRARY_PATH=$LD_LIBRARY_PATH:$d; done
[ -n "$NV" ] && [ -f "$NV/cudnn/lib/libcudnn.so.9" ] && export PEERPLAN_CUDNN_LIB=$NV/cudnn/lib/libcudnn.so.9
V=docs/validation; P=$V/plans; TR=.gpu-ref/traces/azure-conv.json
v() { local name=$1 t=$2; shift 2
  TAIL=16 step "$t" "validate-$name" $B validate --machine "$W/profile.json" --out "$W/validate-$name" "$@"; }
mkplan() { echo "{\"version\": 1, \"name\": \"single[0]\", \"strategy\": \"hand\", \"stages\": [{\"gpus\": [0], \"layer_begin\": 0, \"layer_end\": $2}]}" > "$W/$1.plan.json"; }
left() { [ $SECONDS -lt "$1" ] || { log "  (skipped: ${SECONDS}s used)"; return 1; }; }
profile() { TAIL=3 step 150 profile $B profile --no-progress --model llama-3.1-8b --model mixtral-8x7b \
    --model qwen1.5-moe-a2.7b --model mistral-7b --dtypes bf16 --skip nccl,nccl_nop2p --out "$W/profile.json"
  grep -E "attention grid" "$W/profile.txt" | sed 's/^/  | /' | tee -a "$S" >/dev/null; }
if [ "$PART" = A ]; then
  TAIL=3 step 40 selftest-moe env PEERPLAN_SELFTEST_ONLY=moe $B validate --self-test
  grep -E "FAIL|gemv" "$W/selftest-moe.txt" | head -12 | sed 's/^/  | /' | tee -a "$S" >/dev/null
  TAIL=40 step 110 qbench .gpu/bin/qb "$W/qb"
  TAIL=3 step 170 profile-q $B profile --no-progress --only launch_overhead,hbm,gemm,attention --model llama-3.1-8b \
    --model llama-3.1-70b --dtypes bf16,fp8,int4 --out "$W/profile.json"
  v llama8b-int4 70 --plan $P/llama8b-1gpu.json --model llama-3.1-8b --weights int4 --workload $V/workloads/validate-chat.json --requests 80
  left 430 && v llama70b-fp8 90 --plan $P/llama70b-1gpu.json --model llama-3.1-70b --weights fp8 --workload $V/workloads/validate-chat.json --requests 60 --rate 2
  left 480 && TAIL=4 step 25 steps-8b $B validate --bench-steps --plan $P/llama8b-1gpu.json --model llama-3.1-8b \
    --machine "$W/profile.json" --batches 1,8,32,64 --context 1024 --prefill 2048 --out "$W/steps-8b"
  left 500 && TAIL=4 step 80 torch-ref python3 .gpu-ref/torch_ref.py "$W"
  gzip -f "$W/profile.json"; for f in "$W"/validate-*/iterations.json; do [ -f "$f" ] && gzip -f "$f"; done
  tar czf "$OUT/part$PART.tgz" -C "$W" --exclude=iterations.json --exclude='*.png' . 2>/dev/null
  log "done $(date -u +%FT%TZ), ${SECONDS}s"; exit 0
fi
if [ "$PART" = B ]; then
  TAIL=3 step 150 profile $B profile --no-progress --model llama-3.1-8b --model mixtral-8x7b --model qwen1.5-moe-a2.7b \
    --dtypes bf16,fp8 --skip nccl,nccl_nop2p --out "$W/profile.json"
  grep -E "attention grid" "$W/profile.txt" | sed 's/^/  | /' | tee -a "$S" >/dev/null
  TAIL=4 step 40 steps-mixtral $B validate --bench-steps --plan $P/mixtral-1gpu.json --model mixtral-8x7b \
    --machine "$W/profile.json" --batches 1,2,4 --context 1024 --out "$W/steps-mixtral"
  v llama8b-azure-conv 75 --plan $P/llama8b-1gpu.json --model llama-3.1-8b --workload $TR --requests 120
  v llama8b-fp8 60 --plan $P/llama8b-1gpu.json --model llama-3.1-8b --weights fp8 --workload $V/workloads/validate-chat.json --requests 80
  left 330 && v llama8b-64k-100k 210 --plan $P/llama8b-1gpu.json --model llama-3.1-8b --workload models/workloads/long-prompt-64k-100k.json
  gzip -f "$W/profile.json"; for f in "$W"/validate-*/iterations.json; do [ -f "$f" ] && gzip -f "$f"; done
  tar czf "$OUT/part$PART.tgz" -C "$W" --exclude=iterations.json --exclude='*.png' . 2>/dev/null
  log "done $(date -u +%FT%TZ), ${SECONDS}s"; exit 0
fi
if [ "$PART" = C ]; then
  TAIL=3 step 60 selftest-mla env PEERPLAN_SELFTEST_ONLY=mla $B validate --self-test
  grep -E "FAIL|mismatch" "$W/selftest-mla.txt" | head -8 | sed 's/^/  | /' | tee -a "$S" >/dev/null
  [ -x .gpu/bin/mla_bench ] && TAIL=30 step 60 mla-bench .gpu/bin/mla_bench
  TAIL=3 step 240 qbench env QB_W4_ONLY=1 .gpu/bin/qb "$W/qb"
  grep -E "PASS|FAIL|four GEMMs" "$W/qbench.txt" | grep -E "PASS|FAIL|M=1 |M=8 " | sed 's/^/  | /' | tee -a "$S" >/dev/null
  # The fastest variant on Llama-3.1-8B's four GEMMs summed over M = 1..16 (graph), if qb's self-test passed.
  if grep -q "^PASS" "$W/qbench.txt" && ! grep -q "^FAIL" "$W/qbench.txt"; then
    BEST=$(awk '/llama-3.1-8b int4 rot v[0-9] M=(1|2|4|8|16) +four GEMMs/ {v=$4; for (i=1;i<=NF;i++) if ($i=="graph") {t[v]+=$(i+1)}}
      END {b=""; for (v in t) if (b=="" || t[v] < t[b]) b=v; print b}' "$W/qbench.txt")
    [ -n "$BEST" ] && export PEERPLAN_W4A16=$BEST && log "  W4A16 variant for the rest of this call: $BEST"
  fi
  TAIL=3 step 150 profile $B profile --no-progress --model llama-3.1-8b --model qwen1.5-moe-a2.7b --dtypes bf16,fp8,int4 \
    --skip nccl,nccl_nop2p --out "$W/profile.json"
  grep -E "attention grid" "$W/profile.txt" | sed 's/^/  | /' | tee -a "$S" >/dev/null
  v llama8b-fp8 60 --plan $P/llama8b-1gpu.json --model llama-3.1-8b --weights fp8 --workload $V/workloads/validate-chat.json --requests 80
  v llama8b-int4 60 --plan $P/llama8b-1gpu.json --model llama-3.1-8b --weights int4 --workload $V/workloads/validate-chat.json --requests 80
  left 480 && TAIL=8 step 40 steps-int4 $B validate --bench-steps --plan $P/llama8b-1gpu.json --model llama-3.1-8b --weights int4 \
    --machine "$W/profile.json" --batches 1,8,32,64 --context 1024 --prefill 0 --out "$W/steps-int4"
  gzip -f "$W/profile.json"; for f in "$W"/validate-*/iterations.json; do [ -f "$f" ] && gzip -f "$f"; done
  tar czf "$OUT/part$PART.tgz" -C "$W" --exclude=iterations.json --exclude='*.png' . 2>/dev/null
  log "done $(date -u +%FT%TZ), ${SECONDS}s"; exit 0
fi
if [ "$PART" = D ]; then
  TAIL=3 step 60 selftest-mla env PEERPLAN_SELFTEST_ONLY=mla $B validate --self-test
  grep -E "FAIL|mismatch" "$W/selftest-mla.txt" | head -8 | sed 's/^/  | /' | tee -a "$S" >/dev/null
  TAIL=3 step 170 profile $B profile --no-progress --model llama-3.1-8b --model qwen1.5-moe-a2.7b --model deepseek-v2-lite \
    --dtypes bf16,fp8,int4 --skip nccl,nccl_nop2p --out "$W/profile.json"
  grep -E "attention grid|elementwise" "$W/profile.txt" | sed 's/^/  | /' | tee -a "$S" >/dev/null
  TAIL=6 step 40 steps-dsv2 $B validate --bench-steps --plan $P/deepseek-v2-lite-1gpu.json --model deepseek-v2-lite \
    --machine "$W/profile.json" --batches 1,8,32 --context 1024 --prefill 2048 --out "$W/steps-dsv2"
  PEERPLAN_OP_TIMES=$W/ops-qwen-moe-long.csv v qwen-moe-long 80 --plan $P/qwen-moe-1gpu.json --model qwen1.5-moe-a2.7b \
    --workload $V/workloads/validate-long-prompt.json
  v dsv2-chat 80 --plan $P/deepseek-v2-lite-1gpu.json --model deepseek-v2-lite --workload $V/workloads/validate-chat.json --requests 80
  v llama8b-fp8 45 --plan $P/llama8b-1gpu.json --model llama-3.1-8b --weights fp8 --workload $V/workloads/validate-chat.json --requests 80
  v llama8b-int4 45 --plan $P/llama8b-1gpu.json --model llama-3.1-8b --weights int4 --workload $V/workloads/validate-chat.json --requests 80
  left 500 && v llama8b-azure-conv 70 --plan $P/llama8b-1gpu.json --model llama-3.1-8b --workload $TR --requests 120
  gzip -f "$W/profile.json" "$W/ops-qwen-moe-long.csv" 2>/dev/null; for f in "$W"/validate-*/iterations.json; do [ -f "$f" ] && gzip -f "$f"; done
  tar czf "$OUT/part$PART.tgz" -C "$W" --exclude=iterations.json --exclude='*.png' . 2>/dev/null
  log "done $(date -u +%FT%TZ), ${SECONDS}s"; exit 0
fi
if [ "$PART" = E ]; then
  TAIL=3 step 150 profile $B profile --no-progress --model llama-3.1-8b --model qwen1.5-moe-a2.7b \
    --dtypes bf16,fp8 --skip nccl,nccl_nop2p --out "$W/profile.json"
  v qwen-moe-long 80 --plan $P/qwen-moe-1gpu.json --model qwen1.5-moe-a2.7b --workload $V/workloads/validate-long-prompt.json
  v llama8b-azure-conv 70 --plan $P/llama8b-1gpu.json --model llama-3.1-8b --workload $TR --requests 120
  left 330 && v llama8b-fp8 45 --plan $P/llama8b-1gpu.json --model llama-3.1-8b --weights fp8 --workload $V/workloads/validate-chat.json --requests 80
  gzip -f "$W/profile.json"; for f in "$W"/validate-*/iterations.json; do [ -f "$f" ] && gzip -f "$f"; done
  tar czf "$OUT/part$PART.tgz" -C "$W" --exclude=iterations.json --exclude='*.png' . 2>/dev/null
  log "done $(date -u +%FT%TZ), ${SECONDS}s"; exit 0
fi
if [ "$PART" = F ]; then
  for w in fp8 int4; do
    TAIL=8 step 40 "steps-8b-$w" $B validate --bench-steps --plan $P/llama8b-1gpu.json --model llama-3.1-8b --weights $w \
      --machine models/hardware/h200x2-nvlink.json --allow-other-host --batches 1,8,32,64 --context 1024 --prefill 0 \
      --out "$W/steps-8b-$w"; done
  TAIL=4 step 100 torch-fp8-step python3 bench/quant/torch_fp8_step_ref.py "$W" llama-3.1-8b
  OUT=$W/moe MOE_W=$W/moe/w GG_S=45 bash bench/moe/run.sh .gpu 2>&1 | tail -n 30 | tee -a "$S" >/dev/null
  tar czf "$OUT/part$PART.tgz" -C "$W" . 2>/dev/null
  log "done $(date -u +%FT%TZ), ${SECONDS}s"; exit 0
fi
echo "unknown part $PART" >&2; exit 2
