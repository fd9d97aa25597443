#!/usr/bin/env bash
# Session 31's prepared calls, one GPU (H100 or H200). Binary: scripts/gpu/build.sh, packed as .gpu-pack
# (docs/DEVELOPING.md), the PyTorch references copied to .gpu-ref (cp ../shared/reference/*.py .gpu-ref/).
# One call <= 600 s.
#   session31.sh A   (~6 min) the activation in the gate_up epilogue after session 31 F's two fixes (the shared
#     branch's Z; the self-test's shapes): self-tests act and moe, a paced profile of Qwen1.5-MoE and Llama-3.1-8B
#     written with PEERPLAN_FUSED_ACT=1 (so its plans price the fused gate_up), then decode steps with the fusion
#     off and on priced from it (8B bf16 / int8 / int4 at 1-2, Qwen1.5-MoE bf16 at 1 / 2 / 8), twice, and the
#     MoE PyTorch reference beside them.
#   session31.sh B   (~1 min) the default rule on Qwen1.5-MoE and 8B int8: PEERPLAN_FUSED_ACT 0 / 1 / all.
#   session31.sh E   (~3 min) D again after the pricing fix, then gpt-oss-20b long prompts from G's profile.
#   session31.sh S   (~5 min, an H200) the GEMMs the shipped profile lacks (routers, shared gate, MLA), to splice.
#   session31.sh R   (~5 min) the newly profiled router / shared-gate / MLA GEMMs, gpt-oss steps with its router rows,
#     then 8B and Qwen1.5-MoE steps with the default activation rule beside torch_ref.py and torch_moe_fp8_ref.py.
#   session31.sh F   (~1 min) every op of gpt-oss-20b's decode step at batch 2 and 4 (eager, CUDA events).
#   session31.sh D   (~1 min) C's gpt-oss sweep only (to 16384), priced from session 31 G's committed profile.
#   session31.sh C   (~6 min) gpt-oss-20b on a fresh paced profile of the lease: decode steps over contexts at
#     1 / 2 / 4 sequences (E priced them from another lease's profile), then its long prompts (E: +1.7 / -0.1 / -7.6 %).
set -u
PART=${1:?usage: session31.sh A | B | C | D | E | F | R | S}
OUT_DEFAULT=/tmp/peerplan-s31
source "$(dirname "$0")/call_lib.sh"
if [ "$PART" = A ]; then
  selftest() { TAIL=3 step 120 "selftest-$1" env PEERPLAN_SELFTEST_ONLY=$1 $B validate --self-test
    grep -E "act epilogue|FAIL|fail" "$W/selftest-$1.txt" | head -30 | sed 's/^/  | /' | tee -a "$S" >/dev/null; }
  selftest act
  selftest moe
  TAIL=4 step 260 profile env PEERPLAN_FUSED_ACT=1 PEERPLAN_SHARED_STREAM=1 $B profile --no-progress \
    --model qwen1.5-moe-a2.7b,llama-3.1-8b --dtypes bf16 --skip nccl,nccl_nop2p --duty 0.5 --out "$W/profile.json"
  grep -o '"executor_act_epilogue"[^,]*' "$W/profile.json" | sed 's/^/  | /' | tee -a "$S"
  round() { for a in 0 1; do
    bench qwen-a$a qwen1.5-moe-a2.7b qwen-moe-1gpu.json bf16 1,2,8 1024 PEERPLAN_FUSED_ACT=$a
    bench 8b-a$a llama-3.1-8b llama8b-1gpu.json bf16 1,2 1024 PEERPLAN_FUSED_ACT=$a
    MACHINE=models/hardware/h200x2-nvlink.json bench 8b-int8-a$a llama-3.1-8b llama8b-1gpu.json int8 1,2 1024 PEERPLAN_FUSED_ACT=$a
    MACHINE=models/hardware/h200x2-nvlink.json bench 8b-int4-a$a llama-3.1-8b llama8b-1gpu.json int4 1,2 1024 PEERPLAN_FUSED_ACT=$a
  done; }
  round
  left 480 && TAIL=12 step 60 torch-moe-ref python3 .gpu-ref/torch_moe_fp8_ref.py "$W"
  left 520 && round  # again, for the lease's drift
  finish
fi
if [ "$PART" = C ]; then
  TAIL=4 step 230 profile $B profile --no-progress --model gpt-oss-20b --dtypes bf16 --skip nccl,nccl_nop2p \
    --duty 0.5 --out "$W/profile.json"
  for ctx in 512 2048 8192; do bench gptoss-c$ctx gpt-oss-20b gpt-oss-20b-1gpu.json - 1,2,4 $ctx; done
  v gptoss20b-long 150 --plan $P/gpt-oss-20b-1gpu.json --model gpt-oss-20b --workload $V/workloads/validate-long-prompt.json
  finish
fi
if [ "$PART" = D ]; then
  # C without its profile (device time short): gpt-oss-20b steps over contexts priced from session 31 G's paced
  # profile (one H100 80GB HBM3, committed). Another lease's GPU: the trend of GPU/price with context is what counts.
  zcat docs/validation/runs/2026-12-07-session31/G/profile.json.gz > "$W/g-profile.json"
  export MACHINE=$W/g-profile.json
  for ctx in 512 1024 2048 4096 8192 16384; do
    bench gptoss-c$ctx gpt-oss-20b gpt-oss-20b-1gpu.json - 1,2,4 $ctx
  done
  finish
fi
if [ "$PART" = E ]; then
  # After the pricing fix (the window is part of a layer's kind): D's sweep again, now priced per layer, then
  # gpt-oss-20b long prompts priced from the same committed profile (another lease's H100: --allow-other-host).
  zcat docs/validation/runs/2026-12-07-session31/G/profile.json.gz > "$W/g-profile.json"
  export MACHINE=$W/g-profile.json
  for ctx in 512 2048 4096 8192 16384; do
    bench gptoss-c$ctx gpt-oss-20b gpt-oss-20b-1gpu.json - 1,2,4 $ctx
  done
  # Per-kernel times inside the decode graphs (Nsight Systems, where the host has it): which op the 4-5 % short
  # price at 4 sequences is (1.00-1.02 at 1-2).
  NSYS=$(command -v nsys || ls /usr/local/cuda/bin/nsys /opt/nvidia/nsight-systems/*/bin/nsys 2>/dev/null | head -1)
  log "  nsys: ${NSYS:-none}"
  if [ -n "$NSYS" ]; then
    for b in 1 2 4; do
      TAIL=3 step 90 "nsys-gptoss-b$b" "$NSYS" profile -t cuda --cuda-graph-trace=node -f true -o "$W/oss-b$b" \
        $B validate --bench-steps --plan $P/gpt-oss-20b-1gpu.json --model gpt-oss-20b --machine "$MACHINE" \
        --allow-other-host --no-measure-missing --batches $b --context 1024 --prefill 0
      TAIL=3 step 60 "nsys-stats-b$b" "$NSYS" stats -r cuda_gpu_kern_sum --format csv -o "$W/oss-b$b" "$W/oss-b$b.nsys-rep"
      rm -f "$W/oss-b$b.nsys-rep" "$W/oss-b$b.sqlite"
    done
  fi
  TAIL=16 step 150 validate-gptoss20b-long $B validate --machine "$MACHINE" --allow-other-host \
    --out "$W/validate-gptoss20b-long" --plan $P/gpt-oss-20b-1gpu.json --model gpt-oss-20b \
    --workload $V/workloads/validate-long-prompt.json
  finish
fi
if [ "$PART" = B ]; then
  # The activation epilogue's default rule (bf16 GEMV and W4A16 only; the routed gemv and int8 with "all"): Qwen1.5-MoE
  # (its shared experts' GEMV fuses, the routed gemv not) and 8B int8 (not fused) with 0 / 1 / all, two rounds.
  export MACHINE=models/hardware/h200x2-nvlink.json
  for r in 1 2; do for a in 0 1 all; do
    bench qwen-a$a qwen1.5-moe-a2.7b qwen-moe-1gpu.json bf16 1,2,8 1024 PEERPLAN_FUSED_ACT=$a PEERPLAN_SHARED_STREAM=1
    bench 8b-int8-a$a llama-3.1-8b llama8b-1gpu.json int8 1,2 1024 PEERPLAN_FUSED_ACT=$a
  done; done
  finish
fi
if [ "$PART" = F ]; then
  # gpt-oss-20b's 4 % at 4 sequences: every op of the median decode step timed on its own (CUDA events, eager;
  # validate's op-class timing, PEERPLAN_OP_TIMES) at batch 2 and 4. Eager adds each op's launch alike at both
  # batches, so the per-op change 2 -> 4 against the price's change shows which op the price misses.
  zcat docs/validation/runs/2026-12-07-session31/G/profile.json.gz > "$W/g-profile.json"
  for n in 2 4; do
    TAIL=6 step 90 "validate-b$n" env PEERPLAN_OP_TIMES="$W/optimes-b$n.csv" $B validate --machine "$W/g-profile.json" \
      --allow-other-host --no-measure-missing --out "$W/validate-b$n" --plan $P/gpt-oss-20b-1gpu.json \
      --model gpt-oss-20b --workload $V/workloads/decode-b$n-1k.json
  done
  finish
fi
if [ "$PART" = R ]; then
  # The router, shared-gate and MLA GEMMs now profiled: time them (--only gemm), then splice gpt-oss-20b's router
  # rows into G's profile and price its decode steps at 1 / 2 / 4 sequences again (F2: the router priced from the
  # fit was a third of the 4 % at batch 4).
  TAIL=3 step 150 profile-gemm $B profile --no-progress --only gemm --model gpt-oss-20b,qwen1.5-moe-a2.7b,deepseek-v2-lite \
    --dtypes bf16 --out "$W/gemm.json"
  zcat docs/validation/runs/2026-12-07-session31/G/profile.json.gz > "$W/g-profile.json"
  python3 - "$W/gemm.json" "$W/g-profile.json" "$W/g-router.json" <<'PY' 2>&1 | tee -a "$S"
import json, sys
new = json.load(open(sys.argv[1]))["measurements"]["gemms"]
g = json.load(open(sys.argv[2]))
small = [r for r in new if r["n"] <= 64 or (r["n"], r["k"]) in {(3072, 2048), (576, 2048), (4096, 512)}]
for (n, k) in sorted({(r["n"], r["k"]) for r in small}):
    print("  | gemm %d x %d: %s" % (n, k, " ".join("m%d %.2f" % (r["m"], r["median_us"]) for r in small
                                                  if (r["n"], r["k"]) == (n, k) and r["m"] <= 64)))
have = {(r["n"], r["k"], r.get("dtype", "bf16")) for r in g["measurements"]["gemms"]}
g["measurements"]["gemms"] += [r for r in new if (r["n"], r["k"]) == (32, 2880) and (32, 2880, "bf16") not in have]
json.dump(g, open(sys.argv[3], "w"))
PY
  MACHINE="$W/g-router.json"
  for ctx in 1024 8192; do bench gptoss-router-c$ctx gpt-oss-20b gpt-oss-20b-1gpu.json - 1,2,4 $ctx; done
  # The default activation rule (session 31) beside the references in one lease, owed since session 31's last lease.
  unset MACHINE
  MACHINE=models/hardware/h200x2-nvlink.json bench 8b llama-3.1-8b llama8b-1gpu.json bf16 1,8,32,64 1024
  MACHINE=models/hardware/h200x2-nvlink.json bench qwen qwen1.5-moe-a2.7b qwen-moe-1gpu.json bf16 1,8,32,64 1024
  left 420 && TAIL=8 step 130 torch-ref python3 .gpu-ref/torch_ref.py "$W"
  left 480 && TAIL=12 step 110 torch-moe-ref python3 .gpu-ref/torch_moe_fp8_ref.py "$W"
  finish
fi
if [ "$PART" = S ]; then
  # An H200 (needs_h200): the GEMMs the shipped profile (models/hardware/h200x2-nvlink.json) lacks since profiles
  # gained the MoE routers, Qwen-MoE's shared-expert gate and MLA's projections (session 31). Then, here:
  #   scripts/splice_grouped_gemm.py models/hardware/h200x2-nvlink.json <gemm.json> --fill-gemms --note "..."
  big=$(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits | awk '{print ($1 > 120000)}')
  [ "$big" = 1 ] || { log "not an H200 (under 120 GB): the rows would not be the shipped profile's GPU"; finish; }
  TAIL=3 step 400 profile-gemm $B profile --no-progress --only gemm \
    --model qwen1.5-moe-a2.7b,mixtral-8x7b,deepseek-v2-lite,gpt-oss-20b,gpt-oss-120b --dtypes bf16,fp8 \
    --out "$W/gemm.json"
  finish
fi
echo "unknown part $PART" >&2; exit 2
