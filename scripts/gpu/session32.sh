#!/usr/bin/env bash
# Session 32's prepared calls, one GPU. Binary: scripts/gpu/build.sh, packed as .gpu-pack (docs/DEVELOPING.md), the
# PyTorch references copied to .gpu-ref (cp ../shared/reference/*.py .gpu-ref/). One call <= 600 s.
#   session32.sh T   (~5 min; an H200 prices from the shipped profile's own SKU) the default activation rule's decode
#     steps beside torch_ref.py and torch_moe_fp8_ref.py in one lease (owed since session 31): Llama-3.1-8B bf16 and
#     Qwen1.5-MoE bf16 and 8B fp8 at 1 / 8 / 32 / 64, 8B W4A16 at 1 / 2 (its ratio to packed bytes on this GPU), and on
#     an H200 Mixtral-8x7B bf16 and 70B fp8 at 1 / 8 / 32 / 64 (issues 14's and 15's tables); then torch_w4a16_ref.py, 8B W4A16 through PyTorch's int4 GEMM.
#   session32.sh G   (~4 min; an H200 for the shipped profile's rows) the GEMV for small matrices at 3-8 tokens (routers,
#     shared gate, MLA's kv_a): self-test pdl, the GEMMs the shipped profile lacks (session31.sh S's list) timed with
#     it and the same three MoE models' bf16 GEMMs with PEERPLAN_SMALL_GEMV=0, then decode steps of gpt-oss-20b,
#     Qwen1.5-MoE and DeepSeek-V2-Lite at 1-8 sequences with it off and on, twice, priced from the shipped profile with
#     the new rows filled in (scripts/splice_grouped_gemm.py --fill-gemms).
#   session32.sh W   (~2 min) whether larger matrices at 3-8 tokens gain on the GEMV too (PEERPLAN_SMALL_GEMV=all, an A/B
#     setting): self-test pdl, the bf16 GEMM rows of Llama-3.1-8B, Qwen1.5-MoE and gpt-oss-20b with the rule and with
#     all, then decode steps at 3-8 sequences with each, twice. session32.sh V: W's rows only (~1 min).
#   session32.sh Q   (~5 min, an H200) session26.sh H in the order of need: Mixtral-8x7B bf16 long prompts from a paced
#     profile of the lease first (93 GB: an H200 only; never run with the routed executor on an H200), then the grouped
#     rows of the three MoE models in fp8 / int8 / int4 for the shipped profile while time is left.
set -u
PART=${1:?usage: session32.sh T | G | W | V | Q}
OUT_DEFAULT=/tmp/peerplan-s32
source "$(dirname "$0")/call_lib.sh"
if [ "$PART" = T ]; then
  export MACHINE=models/hardware/h200x2-nvlink.json
  big=$(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits | awk '{print ($1 > 120000)}')
  bench 8b llama-3.1-8b llama8b-1gpu.json bf16 1,8,32,64 1024
  bench qwen qwen1.5-moe-a2.7b qwen-moe-1gpu.json bf16 1,8,32,64 1024
  # The shipped profile predates the shared experts' second stream (a fresh profile turns it on): forced here too.
  bench qwen-fork qwen1.5-moe-a2.7b qwen-moe-1gpu.json bf16 1,8,32,64 1024 PEERPLAN_SHARED_STREAM=1
  bench 8b-fp8 llama-3.1-8b llama8b-1gpu.json fp8 1,8,32,64 1024
  bench 8b-int4 llama-3.1-8b llama8b-1gpu.json int4 1,2 1024
  # Mixtral bf16 (93 GB) and 70B fp8 (70 GB) fit one H200 only.
  [ "$big" = 1 ] && bench mixtral mixtral-8x7b mixtral-1gpu.json bf16 1,8,32,64 1024
  [ "$big" = 1 ] && bench 70b-fp8 llama-3.1-70b llama70b-1gpu.json fp8 1,8,32,64 1024
  left 400 && TAIL=8 step 130 torch-ref python3 .gpu-ref/torch_ref.py "$W"
  left 480 && TAIL=12 step 110 torch-moe-ref python3 .gpu-ref/torch_moe_fp8_ref.py "$W"
  # PyTorch's int4 weight-only GEMM (tinygemm) in the same decoder: a public kernel's ratio to packed bytes.
  # A whole FP8 decode step in PyTorch (the shared reference times only its GEMM stack); 70B fits an H200 only.
  left 500 && TAIL=4 step 90 torch-fp8-step-ref python3 bench/quant/torch_fp8_step_ref.py "$W" llama-3.1-8b \
    $([ "$big" = 1 ] && echo llama-3.1-70b)
  left 530 && TAIL=6 step 60 torch-w4a16-ref python3 scripts/gpu/torch_w4a16_ref.py "$W"
  finish
fi
if [ "$PART" = G ]; then
  big=$(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits | awk '{print ($1 > 120000)}')
  TAIL=3 step 120 selftest-pdl env PEERPLAN_SELFTEST_ONLY=pdl $B validate --self-test
  grep -E "dense_gemv|FAIL|fail" "$W/selftest-pdl.txt" | head -20 | sed 's/^/  | /' | tee -a "$S" >/dev/null
  models=qwen1.5-moe-a2.7b,deepseek-v2-lite,gpt-oss-20b
  TAIL=3 step 200 profile-gemm $B profile --no-progress --only gemm \
    --model $models$([ "$big" = 1 ] && echo ,mixtral-8x7b,gpt-oss-120b) --dtypes bf16,fp8 --out "$W/gemm.json"
  TAIL=3 step 120 profile-gemm-cublas env PEERPLAN_SMALL_GEMV=0 $B profile --no-progress --only gemm --model $models \
    --dtypes bf16 --out "$W/gemm-cublas.json"
  python3 - "$W/gemm.json" "$W/gemm-cublas.json" <<'PY' 2>&1 | tee -a "$S"
import json, sys
rows = [{(r["n"], r["k"], r["m"]): r["median_us"] for r in json.load(open(f))["measurements"]["gemms"]
         if r.get("dtype", "bf16") == "bf16"} for f in sys.argv[1:]]
for (n, k) in sorted({(n, k) for (n, k, m) in rows[1] if n <= 1024 and n * k <= 1 << 22}):
    print("  | %5d x %5d  GEMV / cuBLASLt us: %s" % (n, k, "  ".join(
        "m%d %.2f/%.2f" % (m, rows[0].get((n, k, m), -1), rows[1][(n, k, m)]) for m in (1, 2, 4, 8) if (n, k, m) in rows[1])))
PY
  # The shipped profile is an H200's; on an H100, session 31 G's paced profile (another H100 lease) takes the rows.
  target=models/hardware/h200x2-nvlink.json
  [ "$big" = 1 ] || { zcat docs/validation/runs/2026-12-07-session31/G/profile.json.gz > "$W/g-profile.json"; target=$W/g-profile.json; }
  python3 scripts/splice_grouped_gemm.py "$target" "$W/gemm.json" --fill-gemms \
    --out "$W/shipped-filled.json" --note "session 32 G, this lease" > "$W/splice.txt" 2>&1; tail -2 "$W/splice.txt" | tee -a "$S"
  export MACHINE=$W/shipped-filled.json
  for r in 1 2; do for g in 0 1; do
    bench gptoss-g$g gpt-oss-20b gpt-oss-20b-1gpu.json - 1,2,4,8 1024 PEERPLAN_SMALL_GEMV=$g
    bench qwen-g$g qwen1.5-moe-a2.7b qwen-moe-1gpu.json bf16 1,4,8 1024 PEERPLAN_SMALL_GEMV=$g PEERPLAN_SHARED_STREAM=1
    bench dsv2-g$g deepseek-v2-lite deepseek-v2-lite-1gpu.json bf16 1,4,8 1024 PEERPLAN_SMALL_GEMV=$g
  done; done
  rm -f "$W/shipped-filled.json" "$W/g-profile.json"
  finish
fi
if [ "$PART" = W ] || [ "$PART" = V ]; then
  TAIL=3 step 120 selftest-pdl env PEERPLAN_SELFTEST_ONLY=pdl $B validate --self-test
  grep -E "M=6 n=4096|FAIL|fail" "$W/selftest-pdl.txt" | head -10 | sed 's/^/  | /' | tee -a "$S" >/dev/null
  models=llama-3.1-8b,qwen1.5-moe-a2.7b,gpt-oss-20b
  TAIL=2 step 120 profile-gemm $B profile --no-progress --only gemm --model $models --dtypes bf16 --max-tokens 16 \
    --out "$W/gemm.json"
  TAIL=2 step 120 profile-gemm-all env PEERPLAN_SMALL_GEMV=all $B profile --no-progress --only gemm --model $models \
    --dtypes bf16 --max-tokens 16 --out "$W/gemm-all.json"
  python3 - "$W/gemm.json" "$W/gemm-all.json" <<'PY' 2>&1 | tee -a "$S"
import json, sys
rows = [{(r["n"], r["k"], r["m"]): r["median_us"] for r in json.load(open(f))["measurements"]["gemms"]} for f in sys.argv[1:]]
for (n, k) in sorted({(n, k) for (n, k, m) in rows[0]}):
    print("  | %6d x %5d  rule / all us: %s" % (n, k, "  ".join(
        "m%d %.2f/%.2f" % (m, rows[0][(n, k, m)], rows[1].get((n, k, m), -1)) for m in (2, 4, 8) if (n, k, m) in rows[0])))
PY
  [ "$PART" = V ] && finish  # the rows only (a lease's last minute)
  zcat docs/validation/runs/2026-12-07-session31/G/profile.json.gz > "$W/g-profile.json"
  python3 scripts/splice_grouped_gemm.py "$W/g-profile.json" "$W/gemm.json" --fill-gemms --out "$W/priced.json" \
    > "$W/splice.txt" 2>&1
  export MACHINE=$W/priced.json
  for r in 1 2; do for g in 1 all; do
    bench 8b-g$g llama-3.1-8b llama8b-1gpu.json bf16 2,4,8 1024 PEERPLAN_SMALL_GEMV=$g
    bench qwen-g$g qwen1.5-moe-a2.7b qwen-moe-1gpu.json bf16 2,4,8 1024 PEERPLAN_SMALL_GEMV=$g PEERPLAN_SHARED_STREAM=1
    bench gptoss-g$g gpt-oss-20b gpt-oss-20b-1gpu.json - 2,4,8 1024 PEERPLAN_SMALL_GEMV=$g
  done; done
  rm -f "$W/g-profile.json" "$W/priced.json"
  finish
fi
if [ "$PART" = Q ]; then
  big=$(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits | awk '{print ($1 > 120000)}')
  [ "$big" = 1 ] || { log "not an H200 (under 120 GB): Mixtral bf16 does not fit, the rows would not be the shipped GPU's"; finish; }
  TAIL=4 step 170 profile $B profile --no-progress --model mixtral-8x7b --dtypes bf16 --skip nccl,nccl_nop2p --duty 0.5 \
    --out "$W/profile.json"
  v mixtral-bf16-long 110 --plan $P/mixtral-1gpu.json --model mixtral-8x7b --workload $V/workloads/validate-long-prompt.json
  left 330 && TAIL=4 step $((560 - SECONDS)) profile-grouped $B profile --no-progress --only grouped_gemm \
    --model qwen1.5-moe-a2.7b,mixtral-8x7b,deepseek-v2-lite --dtypes fp8,int8,int4 --out "$W/profile-grouped.json"
  finish
fi
echo "unknown part $PART" >&2; exit 2
