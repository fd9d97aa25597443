#!/usr/bin/env bash
# Session 34's prepared call, one GPU (any). Binary: scripts/gpu/build.sh, packed as .gpu-pack (docs/DEVELOPING.md).
#   (A and B ran with binary da2f91f; the warp route and PEERPLAN_MOE_ROUTE are gone since, so today's binary runs
#   their "warp" settings as "cta".)
#   session34.sh A   (~2 min; ROUNDS=1 for less) the two opt-in MoE glue kernels that shorten a decode layer at 1-8
#     tokens: the warp route (PEERPLAN_MOE_ROUTE=warp, session 34: one warp's sort instead of the one-CTA kernel's
#     barriers and scan, up to 32 routed entries) and the v2 combine (PEERPLAN_MOE_COMBINE=v2, session 33, never
#     self-tested). Self-test moe with both on (the route cases of every path, the grouped GEMMs and the combine
#     consuming warp routes), the elementwise rows of the four MoE models with both on and off, then decode steps of
#     Qwen1.5-MoE (shared stream on and off: session 33 M's v2 loss came on the models with shared experts),
#     DeepSeek-V2-Lite and gpt-oss-20b at 1 / 2 / 4 / 8 sequences in four settings
#     (cta+v1 = today's default, cta+v2, warp+v1, warp+v2), priced from session 31 G's paced H100 profile (another
#     lease: GPU/price is indicative, the A/B is the figure).
#   session34.sh B   (~5 min; run it after A in the same call when A's self-test passed: `grep -q "rc=0"` on its line)
#     both kernels on through a whole prediction: a paced profile of Qwen1.5-MoE with them (the rows they are priced
#     from), Qwen1.5-MoE chat validated against it with them, decode steps at 1-8 against the same profile.
#   session34.sh C   (~7 min, any GPU; on an H200 run session32.sh G and Q instead, they are owed longer) the v2
#     combine as the default (binary after da2f91f's revert) through predictions on a fresh paced profile of the lease
#     (Qwen1.5-MoE and DeepSeek-V2-Lite, bf16): decode steps at 1-8 sequences with the shared stream on and off (the
#     data for the overlap model's error in B: one-stream steps are priced offline from the same profile with its
#     executor_shared_stream key off), Qwen1.5-MoE chat with 400 requests, DeepSeek-V2-Lite chat.
#   session34.sh D   (~5 min) C's DeepSeek-V2-Lite part on a profile of its own (C's two-model paced profile ran past
#     its 240 s and left no attention rows, so C's prices were fitted and its DeepSeek-V2-Lite chat ran out of time
#     measuring them): a paced profile of DeepSeek-V2-Lite, its chat validation, decode steps with the stream on / off.
#   session34.sh E   (~3 min: a lease's last minutes) D without pacing: an unpaced profile of DeepSeek-V2-Lite (faster
#     to take), its chat validation (a two-stream run no pricing choice of session 34 was made on), then its steps.
set -u
PART=${1:?usage: session34.sh A | B | C | D | E}
OUT_DEFAULT=/tmp/peerplan-s34
source "$(dirname "$0")/call_lib.sh"
if [ "$PART" = A ]; then
  TAIL=4 step 150 selftest-moe env PEERPLAN_SELFTEST_ONLY=moe PEERPLAN_MOE_ROUTE=warp PEERPLAN_MOE_COMBINE=v2 \
    $B validate --self-test
  grep -E "moe_route T=|warp|moe_combine|FAIL|fail" "$W/selftest-moe.txt" | head -40 | sed 's/^/  | /' | tee -a "$S" >/dev/null
  models=qwen1.5-moe-a2.7b,gpt-oss-20b,deepseek-v2-lite,mixtral-8x7b
  TAIL=2 step 120 profile-ew-new env PEERPLAN_MOE_ROUTE=warp PEERPLAN_MOE_COMBINE=v2 $B profile --no-progress \
    --only elementwise --model $models --max-tokens 64 --out "$W/ew-new.json"
  TAIL=2 step 120 profile-ew-old env PEERPLAN_MOE_ROUTE=cta PEERPLAN_MOE_COMBINE=v1 $B profile --no-progress \
    --only elementwise --model $models --max-tokens 64 --out "$W/ew-old.json"
  python3 scripts/gpu/ew_rows_ab.py "$W/ew-new.json" "$W/ew-old.json" "new / old" 2>&1 | tee -a "$S"
  zcat docs/validation/runs/2026-12-07-session31/G/profile.json.gz > "$W/g-profile.json"
  export MACHINE=$W/g-profile.json
  for r in $(seq "${ROUNDS:-2}"); do for c in cta-v1 cta-v2 warp-v1 warp-v2; do
    e=(PEERPLAN_MOE_ROUTE=${c%-*} PEERPLAN_MOE_COMBINE=${c#*-})
    bench qwen-$c qwen1.5-moe-a2.7b qwen-moe-1gpu.json bf16 1,2,4,8 1024 "${e[@]}" PEERPLAN_SHARED_STREAM=1
    bench qwen1s-$c qwen1.5-moe-a2.7b qwen-moe-1gpu.json bf16 1,2,4,8 1024 "${e[@]}" PEERPLAN_SHARED_STREAM=0
    bench dsv2-$c deepseek-v2-lite deepseek-v2-lite-1gpu.json bf16 1,2,4,8 1024 "${e[@]}"
    bench gptoss-$c gpt-oss-20b gpt-oss-20b-1gpu.json - 1,2,4,8 1024 "${e[@]}"
  done; done
  rm -f "$W/g-profile.json"
  finish
fi
if [ "$PART" = B ]; then
  export PEERPLAN_MOE_ROUTE=warp PEERPLAN_MOE_COMBINE=v2
  TAIL=4 step 280 profile $B profile --no-progress --model qwen1.5-moe-a2.7b --dtypes bf16 --skip nccl,nccl_nop2p \
    --duty 0.5 --out "$W/profile.json"
  bench qwen qwen1.5-moe-a2.7b qwen-moe-1gpu.json bf16 1,2,4,8 1024
  left 420 && v qwen-chat 150 --plan $P/qwen-moe-1gpu.json --model qwen1.5-moe-a2.7b --weights bf16 \
    --workload $V/workloads/validate-chat.json
  finish
fi
if [ "$PART" = C ]; then
  TAIL=4 step 240 profile $B profile --no-progress --model qwen1.5-moe-a2.7b,deepseek-v2-lite --dtypes bf16 \
    --skip nccl,nccl_nop2p --duty 0.5 --out "$W/profile.json"
  for r in 1 2; do for st in 1 0; do
    bench qwen-s$st qwen1.5-moe-a2.7b qwen-moe-1gpu.json bf16 1,2,3,4,6,8 1024 PEERPLAN_SHARED_STREAM=$st
    bench dsv2-s$st deepseek-v2-lite deepseek-v2-lite-1gpu.json bf16 1,2,4,8 1024 PEERPLAN_SHARED_STREAM=$st
  done; done
  left 420 && v qwen-chat 140 --plan $P/qwen-moe-1gpu.json --model qwen1.5-moe-a2.7b --weights bf16 \
    --workload $V/workloads/validate-chat.json --requests 400
  left 500 && v dsv2-chat 90 --plan $P/deepseek-v2-lite-1gpu.json --model deepseek-v2-lite --weights bf16 \
    --workload $V/workloads/validate-chat.json
  finish
fi
if [ "$PART" = D ]; then
  TAIL=4 step 200 profile $B profile --no-progress --model deepseek-v2-lite --dtypes bf16 --skip nccl,nccl_nop2p \
    --duty 0.5 --out "$W/profile.json"
  v dsv2-chat 110 --plan $P/deepseek-v2-lite-1gpu.json --model deepseek-v2-lite --weights bf16 \
    --workload $V/workloads/validate-chat.json
  for st in 1 0; do bench dsv2-s$st deepseek-v2-lite deepseek-v2-lite-1gpu.json bf16 1,2,4,8 1024 PEERPLAN_SHARED_STREAM=$st; done
  finish
fi
if [ "$PART" = E ]; then
  TAIL=4 step 100 profile $B profile --no-progress --model deepseek-v2-lite --dtypes bf16 --skip nccl,nccl_nop2p \
    --out "$W/profile.json"
  v dsv2-chat 75 --plan $P/deepseek-v2-lite-1gpu.json --model deepseek-v2-lite --weights bf16 \
    --workload $V/workloads/validate-chat.json
  for st in 1 0; do bench dsv2-s$st deepseek-v2-lite deepseek-v2-lite-1gpu.json bf16 1,2,4,8 1024 PEERPLAN_SHARED_STREAM=$st; done
  finish
fi
echo "unknown part $PART" >&2; exit 2
