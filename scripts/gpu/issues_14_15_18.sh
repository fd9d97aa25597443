#!/usr/bin/env bash
# Issues 14, 15 and 18 on one H200, in two back-to-back device calls (the machine stays warm between):
#   part A (kernels, ~7 min): every kernel's self-test (own prefill attention, then cuDNN's), the routed-MoE
#     decode steps beside the PyTorch reference (bench/moe/run.sh), FP8 / W4A16 / FP8-KV decode steps of
#     Llama-3.1-8B, the PyTorch SDPA reference for the attention table.
#   part B (validations, ~7 min): a fresh profile of this lease (default models + Qwen1.5-MoE, bf16 and fp8
#     GEMMs), then single-GPU validations priced from it: Qwen1.5-MoE and Mixtral under a chat and a
#     long-prompt workload (routed MoE), Llama-3.1-8B fp8 and int4, Llama-3.1-70B fp8 on one GPU, Llama-3.1-8B
#     under 8k-32k prompts.
# carry [".gpu", ".gpu-ref"]; usage: scripts/gpu/issues_14_15_18.sh A|B   (outputs: $OUT/*.tgz, summary.txt)
set -u
PART=${1:-A}
OUT=${OUT:-/tmp/peerplan-final}; W=$OUT/w$PART; mkdir -p "$W"
export NCCL_NVLS_ENABLE=0 PEERPLAN_HOME=$PWD LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
B=$PWD/.gpu/bin/peerplan; S=$OUT/summary-$PART.txt
ldd "$B" | grep -q 'not found' && export LD_LIBRARY_PATH=$LD_LIBRARY_PATH:$PWD/.gpu/lib
log() { echo "$*" | tee -a "$S"; }
step() { local t=$1 name=$2; shift 2; log "+ [$name] $*"; local t0=$(date +%s.%N)
  timeout "$t" "$@" > "$W/$name.txt" 2>&1; local rc=$?
  log "  rc=$rc $(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN{printf "%.1f", b-a}') s"
  tail -n "${TAIL:-6}" "$W/$name.txt" | sed 's/^/  | /' | tee -a "$S" >/dev/null
  tar czf "$OUT/part$PART.tgz" -C "$W" . 2>/dev/null; }
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader; } | tee -a "$S"
V=docs/validation; P=$V/plans; M=models/hardware/h200x2-nvlink.json
if [ "$PART" = A ]; then
  TAIL=4 step 60 selftest $B validate --self-test
  NV=$(python3 -c "import importlib.util as u, os; print(os.path.dirname(list(u.find_spec('nvidia.cudnn').submodule_search_locations)[0]))" 2>/dev/null)
  [ -n "$NV" ] && for d in "$NV"/*/lib; do export LD_LIBRARY_PATH=$LD_LIBRARY_PATH:$d; done
  [ -n "$NV" ] && [ -f "$NV/cudnn/lib/libcudnn.so.9" ] && export PEERPLAN_CUDNN_LIB=$NV/cudnn/lib/libcudnn.so.9
  PEERPLAN_PREFILL_ATTENTION=auto TAIL=4 step 60 selftest-cudnn $B validate --self-test
  MOE_W=$W/moe OUT=$W/moeout STEP_S=60 GG_S=45 bench/moe/run.sh .gpu > "$W/moe-run.txt" 2>&1
  tail -n 30 "$W/moe-run.txt" | tee -a "$S" >/dev/null; cp "$W/moeout/summary.txt" "$OUT/moe-summary.txt" 2>/dev/null
  for w in "" "--weights fp8" "--weights int4" "--weights fp8 --kv-dtype fp8"; do
    TAIL=8 step 40 "steps-8b${w//[ -]/_}" $B validate --bench-steps --plan $P/llama8b-1gpu.json --model llama-3.1-8b \
      --machine $M --allow-other-host --batches 1,8,32,64 --context 1024 --prefill 2048 $w
  done
  TAIL=12 step 90 torch-attn python3 .gpu-ref/torch_attn_ref.py "$W"
elif [ "$PART" = C ]; then   # re-run of the MoE half of B after the grouped-GEMM timing-gate fix
  step 200 profile $B profile --no-progress --model llama-3.1-8b --model mixtral-8x7b --model qwen1.5-moe-a2.7b \
    --dtypes bf16 --out "$W/profile.json"
  v() { local name=$1 t=$2; shift 2
    TAIL=18 step "$t" "validate-$name" $B validate --machine "$W/profile.json" --out "$W/validate-$name" "$@"; }
  v qwen-moe-chat 60 --plan $P/qwen-moe-1gpu.json --model qwen1.5-moe-a2.7b --workload $V/workloads/validate-chat.json --requests 80
  v mixtral-chat 60 --plan $P/mixtral-1gpu.json --model mixtral-8x7b --workload $V/workloads/validate-chat.json --requests 80
  v qwen-moe-long 60 --plan $P/qwen-moe-1gpu.json --model qwen1.5-moe-a2.7b --workload $V/workloads/validate-long-prompt.json
  v mixtral-long 60 --plan $P/mixtral-1gpu.json --model mixtral-8x7b --workload $V/workloads/validate-long-prompt.json
else
  step 210 profile $B profile --no-progress --model llama-3.1-8b --model llama-3.1-70b --model mixtral-8x7b \
    --model qwen1.5-moe-a2.7b --dtypes bf16,fp8 --out "$W/profile.json"
  v() { local name=$1 t=$2; shift 2
    TAIL=18 step "$t" "validate-$name" $B validate --machine "$W/profile.json" --out "$W/validate-$name" "$@"; }
  v qwen-moe-chat 60 --plan $P/qwen-moe-1gpu.json --model qwen1.5-moe-a2.7b --workload $V/workloads/validate-chat.json --requests 80
  v mixtral-chat 60 --plan $P/mixtral-1gpu.json --model mixtral-8x7b --workload $V/workloads/validate-chat.json --requests 80
  v qwen-moe-long 60 --plan $P/qwen-moe-1gpu.json --model qwen1.5-moe-a2.7b --workload $V/workloads/validate-long-prompt.json
  v mixtral-long 60 --plan $P/mixtral-1gpu.json --model mixtral-8x7b --workload $V/workloads/validate-long-prompt.json
  v llama8b-fp8 50 --plan $P/llama8b-1gpu.json --model llama-3.1-8b --weights fp8 --workload $V/workloads/validate-chat.json --requests 80
  v llama70b-fp8 70 --plan $P/llama70b-1gpu.json --model llama-3.1-70b --weights fp8 --workload $V/workloads/validate-chat.json --requests 60 --rate 2
  v llama8b-int4 50 --plan $P/llama8b-1gpu.json --model llama-3.1-8b --weights int4 --workload $V/workloads/validate-chat.json --requests 80
  v llama8b-long 90 --plan $P/llama8b-1gpu.json --model llama-3.1-8b --workload models/workloads/long-prompt-8k-32k.json
fi
gzip -f "$W/profile.json" 2>/dev/null; tar czf "$OUT/part$PART.tgz" -C "$W" . 2>/dev/null
log "done $(date -u +%FT%TZ), ${SECONDS}s"
