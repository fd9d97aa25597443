#!/usr/bin/env bash
# One H200 per call (ninth session's preparation, 2026-12-04; device tool: carry [".gpu", ".gpu-ref"]; build with
# scripts/gpu/build.sh from a clean worktree of the commit to measure, then bench/quant/w4layout.sh .gpu/bin/w4layout
# and strip it). .gpu-ref holds the shared PyTorch references.
#   scripts/gpu/session9.sh A  (~9 min) what the ninth session changed, validated: a profile whose decode attention,
#                              grouped expert GEMM and small GEMM rows read cold inputs (3728b8f, 3722c2a) and which
#                              times MLA's batched absorbed GEMMs and MLA attention (helper, issue 23); validations
#                              Qwen1.5-MoE long (issue 14: TPOT was -9.9 %, batch-1 steps 1.12x their price),
#                              DeepSeek-V2-Lite chat (issues 14/23: +23.5 / +40.0 / +37.2 %), Llama-3.1-8B Azure conv
#                              and 8B FP8 chat (no regression from the cold rows).
#   scripts/gpu/session9.sh C  (~8 min) a second lease for issue 23's list: a profile, then Llama-3.2-1B (not shipped,
#                              head_dim 64; its shapes measured by validate) on the Azure conversation trace (it timed
#                              out at 95 s in session 7), Qwen1.5-MoE long and DeepSeek-V2-Lite chat again.
#   scripts/gpu/session9.sh B  (~7 min) W4A16's weight-layout experiment (bench/quant/w4layout.cu: the production
#                              GEMV's loads vs the same loads from a tiled layout vs a GEMV over it, Llama-3.1-8B's
#                              four GEMMs at batch 1), then the decode kernel's full-wave trim (57cff44, PEERPLAN_DECODE_FULL_WAVE=trim):
#                              the attention grid with and without it, side by side per (heads, batch, context), and
#                              each grid's held-back error; then Mixtral and DeepSeek-V2-Lite on the long-prompt
#                              workload with the default profile of this call.
#   scripts/gpu/session9.sh D  (~8 min) this session's kernel changes beside the PyTorch references in one lease:
#                              8B decode steps (decode attention default and full-wave trim) beside torch_ref.py,
#                              8B FP8 / W4A16 steps beside torch_fp8_step_ref.py, routed MoE beside torch._grouped_mm.
# Outputs under $OUT (summary-*.txt and a tgz of the raw files).
set -u
PART=${1:-A}
OUT_DEFAULT=/tmp/peerplan-s9
source "$(dirname "$0")/call_lib.sh"
TR=docs/validation/workloads/azure-conv.json
if [ "$PART" = A ]; then
  TAIL=3 step 60 selftest-mla env PEERPLAN_SELFTEST_ONLY=mla $B validate --self-test
  grep -E "FAIL|mismatch" "$W/selftest-mla.txt" | head -8 | sed 's/^/  | /' | tee -a "$S" >/dev/null
  TAIL=3 step 200 profile $B profile --no-progress --model llama-3.1-8b --model qwen1.5-moe-a2.7b --model deepseek-v2-lite \
    --dtypes bf16,fp8 --skip nccl,nccl_nop2p --out "$W/profile.json"
  grep -E "attention grid|elementwise|not timed|skipped" "$W/profile.txt" | head -8 | sed 's/^/  | /' | tee -a "$S" >/dev/null
  python3 - "$W/profile.json" <<'PY' 2>&1 | tee -a "$S"
import json, sys
m = json.load(open(sys.argv[1]))["measurements"]
b = [g for g in m["gemms"] if g.get("batch", 1) > 1]
a = [x for x in m["attention"] if x.get("v_dim", x["head_dim"]) != x["head_dim"]]
print(f"batched GEMM rows: {len(b)}; MLA attention rows: {len(a)} (decode {sum(x['phase'] == 'decode' for x in a)})")
for g in b[:8]:
    print(f"  m={g['m']} n={g['n']} k={g['k']} batch {g['batch']}: {g['median_us']:.1f} us")
PY
  TAIL=6 step 40 steps-dsv2 $B validate --bench-steps --plan $P/deepseek-v2-lite-1gpu.json --model deepseek-v2-lite \
    --machine "$W/profile.json" --batches 1,8,32 --context 1024 --prefill 2048 --out "$W/steps-dsv2"
  v qwen-moe-long 80 --plan $P/qwen-moe-1gpu.json --model qwen1.5-moe-a2.7b --workload $V/workloads/validate-long-prompt.json
  PEERPLAN_OP_TIMES=$W/ops-dsv2-chat.csv v dsv2-chat 80 --plan $P/deepseek-v2-lite-1gpu.json --model deepseek-v2-lite \
    --workload $V/workloads/validate-chat.json --requests 80
  gzip -f "$W/ops-dsv2-chat.csv" 2>/dev/null
  left 440 && v llama8b-azure-conv 70 --plan $P/llama8b-1gpu.json --model llama-3.1-8b --workload $TR --requests 120
  left 500 && v llama8b-fp8 45 --plan $P/llama8b-1gpu.json --model llama-3.1-8b --weights fp8 --workload $V/workloads/validate-chat.json --requests 80
  finish
fi
if [ "$PART" = B ]; then
  # Issue 15: is W4A16's batch-1 gap the weight layout's? (bench/quant/w4layout.sh .gpu/bin/w4layout)
  [ -x .gpu/bin/w4layout ] && TAIL=9 step 60 w4layout .gpu/bin/w4layout
  for mode in keep trim; do
    TAIL=2 step 120 "grid-$mode" env PEERPLAN_DECODE_FULL_WAVE=$mode $B profile --no-progress --only attention \
      --model llama-3.1-8b --model qwen1.5-moe-a2.7b --out "$W/profile-$mode.json"
  done
  python3 - "$W/profile-keep.json" "$W/profile-trim.json" <<'PY' 2>&1 | tee -a "$S"
import json, sys
rows = [{(a["heads"], a["kv_heads"], a["batch"], a["context"]): a["median_us"] for a in json.load(open(p))["measurements"]["attention"]
         if a["phase"] == "decode"} for p in sys.argv[1:]]
keep, trim = rows
diff = sorted(((trim[k] / keep[k], k) for k in keep if k in trim and abs(trim[k] / keep[k] - 1) > 0.02))
print(f"decode points: {len(keep)}; trim/keep beyond 2 %: {len(diff)}")
for r, k in diff[:12] + diff[-6:]:
    print(f"  heads {k[0]}/{k[1]} batch {k[2]} ctx {k[3]}: keep {keep[k]:.1f} us, trim {trim[k]:.1f} us ({r:.3f})")
PY
  python3 scripts/attention_holdout_study.py "$W/profile-keep.json" "$W/profile-trim.json" 2>&1 | tee -a "$S"
  TAIL=3 step 170 profile $B profile --no-progress --model mixtral-8x7b --model deepseek-v2-lite --dtypes bf16 \
    --skip nccl,nccl_nop2p --out "$W/profile.json"
  left 430 && v dsv2-long 80 --plan $P/deepseek-v2-lite-1gpu.json --model deepseek-v2-lite --workload $V/workloads/validate-long-prompt.json
  left 500 && v mixtral-long 90 --plan $P/mixtral-1gpu.json --model mixtral-8x7b --workload $V/workloads/validate-long-prompt.json
  finish
fi
if [ "$PART" = C ]; then
  mkplan llama-3.2-1b 16
  TAIL=3 step 200 profile $B profile --no-progress --model llama-3.1-8b --model qwen1.5-moe-a2.7b --model deepseek-v2-lite \
    --dtypes bf16 --skip nccl,nccl_nop2p --out "$W/profile.json"
  v llama-3.2-1b-azure-conv 150 --plan "$W/llama-3.2-1b.plan.json" --model tests/data/model/llama-3.2-1b.json --workload $TR --requests 120
  v qwen-moe-long 80 --plan $P/qwen-moe-1gpu.json --model qwen1.5-moe-a2.7b --workload $V/workloads/validate-long-prompt.json
  left 450 && v dsv2-chat 80 --plan $P/deepseek-v2-lite-1gpu.json --model deepseek-v2-lite --workload $V/workloads/validate-chat.json --requests 80
  finish
fi
if [ "$PART" = D ]; then
  # The changed kernels beside the PyTorch references in one lease (the brief's bar): dense decode steps with the
  # decode attention's default plan and with PEERPLAN_DECODE_FULL_WAVE=trim beside torch_ref.py; W4A16 / FP8 steps
  # (the GEMV's shared streaming load) beside the FP8 step reference; the routed MoE decode (grouped GEMM) beside
  # torch._grouped_mm (bench/moe/run.sh).
  M=models/hardware/h200x2-nvlink.json  # topology only: bench-steps times this host's GPU 0
  for mode in keep trim; do
    TAIL=8 step 60 "steps-8b-$mode" env PEERPLAN_DECODE_FULL_WAVE=$mode $B validate --bench-steps \
      --plan $P/llama8b-1gpu.json --model llama-3.1-8b --machine $M --allow-other-host --batches 1,8,32,64 \
      --context 1024 --prefill 2048 --out "$W/steps-8b-$mode"
  done
  TAIL=4 step 90 torch-ref python3 .gpu-ref/torch_ref.py "$W"
  for w in fp8 int4; do
    TAIL=8 step 40 "steps-8b-$w" $B validate --bench-steps --plan $P/llama8b-1gpu.json --model llama-3.1-8b --weights $w \
      --machine $M --allow-other-host --batches 1,8,32,64 --context 1024 --prefill 0 --out "$W/steps-8b-$w"
  done
  left 330 && TAIL=4 step 100 torch-fp8-step python3 bench/quant/torch_fp8_step_ref.py "$W" llama-3.1-8b
  left 400 && { OUT=$W/moe MOE_W=$W/moe/w GG_S=45 bash bench/moe/run.sh .gpu 2>&1 | tail -n 30 | tee -a "$S" >/dev/null; }
  finish
fi
echo "unknown part $PART" >&2; exit 2
