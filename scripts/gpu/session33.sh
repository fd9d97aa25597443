#!/usr/bin/env bash
# Session 33's prepared call, one GPU (any). Binary: scripts/gpu/build.sh, packed as .gpu-pack (docs/DEVELOPING.md).
#   session33.sh M   (~2 min; as run, binary 9cabff3) the MoE route and combine kernels of session 33 against the ones
#     before (PEERPLAN_MOE_ROUTE=v1 / PEERPLAN_MOE_COMBINE=v1; the route change was reverted after, and its variable with
#     it, so this part now times the combine alone): self-test moe (both: correctness and the route's timing
#     lines), their elementwise rows for the four MoE models (moe_route, moe_combine at 1-64 rows), then decode
#     steps of Qwen1.5-MoE (shared stream), gpt-oss-20b and DeepSeek-V2-Lite at 1-8 sequences with each, twice,
#     priced from session 31 G's paced H100 profile (another lease: GPU/price is indicative, the A/B is the figure).
#   session33.sh N   (~1 min; ROUNDS=1 for half) the v2 combine (opt-in since session 33) on a GPU: self-test moe with
#     PEERPLAN_MOE_COMBINE=v2 (M's self-test stopped at a route case of a route change since reverted, before the
#     combine's rows), then decode steps at 1 / 2 / 4 sequences with v1 and v2: Qwen1.5-MoE with its shared experts on
#     the second stream and without, DeepSeek-V2-Lite, gpt-oss-20b; why v2 lost ~1 % at 1-2 sequences on the first two
#     in M while gpt-oss gained.
set -u
PART=${1:?usage: session33.sh M | N}
OUT_DEFAULT=/tmp/peerplan-s33
source "$(dirname "$0")/call_lib.sh"
if [ "$PART" = M ]; then
  TAIL=4 step 150 selftest-moe env PEERPLAN_SELFTEST_ONLY=moe $B validate --self-test
  grep -E "moe_route T=|moe_combine|FAIL|fail" "$W/selftest-moe.txt" | head -20 | sed 's/^/  | /' | tee -a "$S" >/dev/null
  TAIL=2 step 150 selftest-moe-v1 env PEERPLAN_SELFTEST_ONLY=moe PEERPLAN_MOE_ROUTE=v1 PEERPLAN_MOE_COMBINE=v1 \
    $B validate --self-test
  grep -E "moe_route T=|FAIL|fail" "$W/selftest-moe-v1.txt" | head -10 | sed 's/^/  | v1 /' | tee -a "$S" >/dev/null
  models=qwen1.5-moe-a2.7b,gpt-oss-20b,deepseek-v2-lite,mixtral-8x7b
  TAIL=2 step 120 profile-ew $B profile --no-progress --only elementwise --model $models --max-tokens 64 \
    --out "$W/ew.json"
  TAIL=2 step 120 profile-ew-v1 env PEERPLAN_MOE_ROUTE=v1 PEERPLAN_MOE_COMBINE=v1 $B profile --no-progress \
    --only elementwise --model $models --max-tokens 64 --out "$W/ew-v1.json"
  python3 scripts/gpu/ew_rows_ab.py "$W/ew.json" "$W/ew-v1.json" "new / v1" 2>&1 | tee -a "$S"
  zcat docs/validation/runs/2026-12-07-session31/G/profile.json.gz > "$W/g-profile.json"
  export MACHINE=$W/g-profile.json
  for r in 1 2; do for v in new v1; do
    e=(PEERPLAN_MOE_ROUTE=v2 PEERPLAN_MOE_COMBINE=v2); [ $v = v1 ] && e=(PEERPLAN_MOE_ROUTE=v1 PEERPLAN_MOE_COMBINE=v1)
    bench qwen-$v qwen1.5-moe-a2.7b qwen-moe-1gpu.json bf16 1,2,4,8 1024 "${e[@]}" PEERPLAN_SHARED_STREAM=1
    bench gptoss-$v gpt-oss-20b gpt-oss-20b-1gpu.json - 1,2,4,8 1024 "${e[@]}"
    bench dsv2-$v deepseek-v2-lite deepseek-v2-lite-1gpu.json bf16 1,2,4,8 1024 "${e[@]}"
  done; done
  rm -f "$W/g-profile.json"
  finish
fi
if [ "$PART" = N ]; then
  TAIL=4 step 150 selftest-moe env PEERPLAN_SELFTEST_ONLY=moe PEERPLAN_MOE_COMBINE=v2 $B validate --self-test
  grep -E "moe_combine|FAIL|fail|match" "$W/selftest-moe.txt" | head -20 | sed 's/^/  | /' | tee -a "$S" >/dev/null
  zcat docs/validation/runs/2026-12-07-session31/G/profile.json.gz > "$W/g-profile.json"
  export MACHINE=$W/g-profile.json
  for r in $(seq "${ROUNDS:-2}"); do for c in v1 v2; do
    bench qwen-$c qwen1.5-moe-a2.7b qwen-moe-1gpu.json bf16 1,2,4 1024 PEERPLAN_MOE_COMBINE=$c PEERPLAN_SHARED_STREAM=1
    bench qwen1s-$c qwen1.5-moe-a2.7b qwen-moe-1gpu.json bf16 1,2,4 1024 PEERPLAN_MOE_COMBINE=$c PEERPLAN_SHARED_STREAM=0
    bench dsv2-$c deepseek-v2-lite deepseek-v2-lite-1gpu.json bf16 1,2,4 1024 PEERPLAN_MOE_COMBINE=$c
    bench gptoss-$c gpt-oss-20b gpt-oss-20b-1gpu.json - 1,2,4 1024 PEERPLAN_MOE_COMBINE=$c
  done; done
  rm -f "$W/g-profile.json"
  finish
fi
echo "unknown part $PART" >&2; exit 2
