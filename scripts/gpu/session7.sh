#!/usr/bin/env bash
# One H200, 2026-12-03/04 (seventh session; device tool: carry [".gpu", ".gpu-ref"]; build with scripts/gpu/build.sh).
# .gpu-ref/traces holds AzurePublicDataset's data/AzureLLMInferenceTrace_{conv,code}.csv (not in git: 1 MB) and
# azure-conv.json, the workload that replays the conversation trace (batching and SLOs of validate-chat).
#   scripts/gpu/session7.sh A  (~9 min) self-test (the grid MoE routing, windowed attention), a fresh profile of the
#                              shipped models validated here, then validations: Qwen1.5-MoE long prompts (per-op
#                              times: PEERPLAN_OP_TIMES), Llama-3.1-8B
#                              and three models no profile times (Qwen2-7B: 7 q heads per kv head; Phi-3-mini:
#                              head_dim 96; Llama-3.2-1B: head_dim 64) on the first 120 requests of the Azure
#                              conversation trace, their shapes measured by validate itself (issue 23 item 1),
#   scripts/gpu/session7.sh B  (~9 min) a fresh profile, self-tests of head_dim 160-256, norms to 16384 and
#                              QK-norm, Qwen3-8B (QK-norm) on the conversation trace, Mistral-7B 8k-32k (window 4096), Llama-3.1-8B 64k-100k.
#   scripts/gpu/session7.sh C  (~5 min) full self-test (the rotary rewrite), bench/moe/run.sh (the routed MoE decode
#                              step beside the PyTorch reference, issue 14).
#   scripts/gpu/session7.sh D  (~9 min) self-tests of the new kernels (moe; HEADDIM=1: head_dim 160-256), the attention
#                              bench at head_dim 256 (.gpu-ref/kb), the gemv's five shapes on Mixtral, bench/moe/run.sh,
#                              a fresh profile, then Qwen1.5-MoE long, Phi-3-mini, Qwen2-7B, Mixtral long, Llama-3.2-1B.
#   scripts/gpu/session7.sh E  (~1 min) the gemv grouped-GEMM kernel: self-test (moe) and decode steps with it on / off.
# Outputs under $OUT (summary-*.txt and a tgz of the raw files).
set -u
PART=${1:-A}
OUT=${OUT:-/tmp/peerplan-s7}; W=$OUT/w$PART; mkdir -p "$W"
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
  TAIL=2 step 100 selftest $B validate --self-test
  grep -E "FAIL|mismatch|moe_route T=|refus" "$W/selftest.txt" | head -16 | sed 's/^/  | /' | tee -a "$S" >/dev/null
  grep -cE " ok" "$W/selftest.txt" | sed 's/^/  | ok rows: /' | tee -a "$S" >/dev/null
  profile
  PEERPLAN_OP_TIMES=$W/ops-qwen-moe-long.csv v qwen-moe-long 70 --plan $P/qwen-moe-1gpu.json --model qwen1.5-moe-a2.7b \
    --workload $V/workloads/validate-long-prompt.json
  v llama8b-azure-conv 70 --plan $P/llama8b-1gpu.json --model llama-3.1-8b --workload $TR --requests 120
  mkplan phi-3-mini 32; mkplan llama-3.2-1b 16
  left 470 && v qwen2-7b-azure-conv 95 --plan $P/qwen2-7b-1gpu.json --model tests/data/model/qwen2-7b.json --workload $TR --requests 120
  left 510 && v phi-3-mini-azure-conv 65 --plan "$W/phi-3-mini.plan.json" --model tests/data/model/phi-3-mini.json --workload $TR --requests 120
  left 500 && v llama-3.2-1b-azure-conv 95 --plan "$W/llama-3.2-1b.plan.json" --model tests/data/model/llama-3.2-1b.json --workload $TR --requests 120
fi
if [ "$PART" = B ]; then  # a fresh lease is another GPU: profile it again before anything compared against it
  profile
  mkplan qwen3-8b 36
  TAIL=4 step 60 selftest-headdim env PEERPLAN_SELFTEST_ONLY=headdim $B validate --self-test
  for o in norm qknorm; do TAIL=2 step 30 selftest-$o env PEERPLAN_SELFTEST_ONLY=$o $B validate --self-test; done
  grep -hE "FAIL|mismatch|refus" "$W"/selftest-*.txt | head -12 | sed 's/^/  | /' | tee -a "$S" >/dev/null
  v qwen3-8b-azure-conv 95 --plan "$W/qwen3-8b.plan.json" --model tests/data/model/qwen3-8b.json --workload $TR --requests 120
  v mistral7b-8k-32k 90 --plan $P/llama8b-1gpu.json --model mistral-7b --workload models/workloads/long-prompt-8k-32k.json --requests 24
  left 330 && v llama8b-64k-100k 200 --plan $P/llama8b-1gpu.json --model llama-3.1-8b --workload models/workloads/long-prompt-64k-100k.json
fi
if [ "$PART" = C ]; then  # the rotary rewrite checked, then issue 14's end-to-end MoE decode beside PyTorch
  TAIL=2 step 100 selftest $B validate --self-test
  grep -E "FAIL|mismatch|rotary|kv_cache_write" "$W/selftest.txt" | head -16 | sed 's/^/  | /' | tee -a "$S" >/dev/null
  grep -cE " ok$" "$W/selftest.txt" | sed 's/^/  | ok rows: /' | tee -a "$S" >/dev/null
  OUT=$W/moe MOE_W=$W/moe/w GG_S=45 bash bench/moe/run.sh .gpu 2>&1 | tee -a "$S" | tail -n 40
  tar czf "$OUT/part$PART.tgz" -C "$W" . 2>/dev/null
  log "done $(date -u +%FT%TZ), ${SECONDS}s"; exit 0
fi
if [ "$PART" = D ]; then  # the session's last call: new kernels checked, then the validations again
  TAIL=3 step 30 selftest-moe env PEERPLAN_SELFTEST_ONLY=moe $B validate --self-test
  if grep -q "FAIL" "$W/selftest-moe.txt" || ! grep -q "all kernels match" "$W/selftest-moe.txt"; then
    export PEERPLAN_MOE_GEMV=0; log "  the gemv kernel is OFF for the rest of this call: its self-test failed"; fi
  TAIL=3 step 60 selftest-headdim env PEERPLAN_SELFTEST_ONLY=headdim $B validate --self-test
  grep -E "FAIL" "$W/selftest-headdim.txt" | head -8 | sed 's/^/  | /' | tee -a "$S" >/dev/null
  [ -x .gpu-ref/kb ] && TAIL=40 step 60 kb-table .gpu-ref/kb table all
  for sh in 4x2 4x4 8x2; do  # the gemv's rows per warp x unroll on Mixtral's decode steps (~6 s each)
    TAIL=4 step 30 "gemv-$sh" env PEERPLAN_MOE_GEMV_SHAPE=$sh $B validate --bench-steps --plan $P/mixtral-1gpu.json \
      --model mixtral-8x7b --machine models/hardware/h200x2-nvlink.json --allow-other-host --batches 1,2 --context 1024 \
      --out "$W/gemv-$sh"; done
  OUT=$W/moe MOE_W=$W/moe/w GG_S=45 bash bench/moe/run.sh .gpu 2>&1 | grep -E "PASS|FAIL|^ +[0-9]+ +[0-9.]+ +[0-9.]+" | tee -a "$S" >/dev/null
  profile
  mkplan phi-3-mini 32; mkplan llama-3.2-1b 16
  PEERPLAN_OP_TIMES=$W/ops-qwen-moe-long.csv v qwen-moe-long 70 --plan $P/qwen-moe-1gpu.json --model qwen1.5-moe-a2.7b \
    --workload $V/workloads/validate-long-prompt.json
  left 420 && v phi-3-mini-azure-conv 90 --plan "$W/phi-3-mini.plan.json" --model tests/data/model/phi-3-mini.json --workload $TR --requests 120
  left 460 && v llama8b-8k-32k 70 --plan $P/llama8b-1gpu.json --model llama-3.1-8b --workload models/workloads/long-prompt-8k-32k.json --requests 24
  left 470 && v qwen2-7b-azure-conv 95 --plan $P/qwen2-7b-1gpu.json --model tests/data/model/qwen2-7b.json --workload $TR --requests 120
  left 480 && v mixtral-long 80 --plan $P/mixtral-1gpu.json --model mixtral-8x7b --workload $V/workloads/validate-long-prompt.json
  left 500 && v llama-3.2-1b-azure-conv 90 --plan "$W/llama-3.2-1b.plan.json" --model tests/data/model/llama-3.2-1b.json --workload $TR --requests 120
  gzip -f "$W/profile.json"; for f in "$W"/validate-llama8b-*/iterations.json; do [ -f "$f" ] && gzip -f "$f"; done
  tar czf "$OUT/part$PART.tgz" -C "$W" --exclude=iterations.json --exclude='*.png' . 2>/dev/null
  log "done $(date -u +%FT%TZ), ${SECONDS}s"; exit 0
fi
if [ "$PART" = E ]; then  # the gemv grouped-GEMM kernel: its self-test, then decode steps with it on and off
  TAIL=3 step 60 selftest-moe env PEERPLAN_SELFTEST_ONLY=moe $B validate --self-test
  grep -E "FAIL|gemv" "$W/selftest-moe.txt" | sed 's/^/  | /' | tee -a "$S" >/dev/null
  for g in 1 0; do for m in qwen1.5-moe-a2.7b:bench/moe/qwen1.5-moe-1gpu.json mixtral-8x7b:$P/mixtral-1gpu.json; do
    TAIL=7 step 60 "steps-gemv$g-${m%%:*}" env PEERPLAN_MOE_GEMV=$g $B validate --bench-steps --plan "${m#*:}" \
      --model "${m%%:*}" --machine models/hardware/h200x2-nvlink.json --allow-other-host --batches 1,2,4,8,32 \
      --context 1024 --out "$W/steps-gemv$g-${m%%:*}"
  done; done
  tar czf "$OUT/part$PART.tgz" -C "$W" . 2>/dev/null
  log "done $(date -u +%FT%TZ), ${SECONDS}s"; exit 0
fi
if [ "$PART" = A ] || [ "$PART" = B ]; then
  gzip -f "$W/profile.json"; tar czf "$OUT/part$PART.tgz" -C "$W" --exclude=iterations.json --exclude='*.png' . 2>/dev/null
  log "done $(date -u +%FT%TZ), ${SECONDS}s"; exit 0
fi
echo "unknown part $PART" >&2; exit 2
