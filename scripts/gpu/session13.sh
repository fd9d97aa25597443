#!/usr/bin/env bash
# Session 13 on the 2 x H200 host (kind nvidia-h200-x2): the two-GPU parts of issues 17 (peer-memory all-reduce)
# and 16 (data-parallel replicas), and the 2026-11-30 six configurations with the current executor, all priced
# from one profile of the lease. Binary: scripts/gpu/build.sh from committed code, packed as .gpu-pack
# (docs/DEVELOPING.md). Calls (each <= 600 s; the machine stays warm ~30 s between calls, and then a call reuses
# the lease's profile from /tmp/peerplan-lease, checked by GPU UUIDs; a fresh lease is profiled again):
#   session13.sh X1   profile (default measurements, bf16, the default models' shapes), the same under mpirun
#                     --mpi (nccl, peer_allreduce), every kernel's self-test on GPU 0, peer all-reduce against NCCL
#                     and PyTorch (symm_mem one/two-shot, NCCL) in the same lease, plan's all-reduce choices;
#                     then the validation queue as time allows
#   session13.sh X2   the validation queue (whatever this lease has not run yet: issue 16's runs first, then
#                     the six, then issue 17's with the all-reduces now also timed inside CUDA graphs); a fresh
#                     lease is profiled first and its all-reduce curves printed
# and one call on one H200 (kind nvidia-h200):
#   session13.sh S1   (~7 min) issue 18's fine prefill study (session12.sh E), then the default profile and
#                     Llama-3.1-8B's chat runs of X1 (200 requests at 6/s; 40 at 8/s) on this host: X1's eager
#                     prefill ran at 0.87 of its price on the 2 x H200 host's CPU; is it the host?
#   session13.sh S2   (~7 min) the executor beside the PyTorch references in one lease (binary 74e1c51's executor,
#                     unchanged since session 11): 8B decode / prefill steps beside torch_ref.py, FP8 and W4A16
#                     steps beside the FP8 step reference, prefill attention (bench/attention/chunk_bench.cu as
#                     .gpu/bin/cb) beside torch_attn_ref.py with the >= 0.9x check
#   session13.sh S3   (~5 min) routed MoE decode beside torch._grouped_mm (bench/moe/run.sh) and the B = 1 bound
#   session13.sh S4   (~4 min) why one lease's GEMM table is 5-14 % slower than another's (8B qkv at M = 4096: 282 /
#                     311 / 321 us in session 12 D / S1 / X1; the eager gap study): SM clock, power and throttle
#                     reasons every 100 ms while the GEMM table is timed twice and 8B serves on the first
# Queue: TP2 8B and 70B with NCCL, custom all-reduce and P2P off (issue 17); 8B on one GPU, DP2 (least
# outstanding, round robin) and TP2 at twice the rate (issue 16); the six (8B single, PP2, PP2 P2P off, Mixtral
# EP2; TP2 and TP2 P2P off are issue 17's 8B NCCL and P2P-off runs, same workload, requests and rate).
set -u
PART=${1:?usage: session13.sh X1|X2|S1|S2|S3|S4}
OUT_DEFAULT=/tmp/peerplan-s13
source "$(dirname "$0")/call_lib.sh"
if [ "$PART" = S1 ]; then
  PEERPLAN_ATTENTION_GRID=fine-prefill TAIL=2 step 240 fine-prefill $B profile --no-progress --only attention \
    --model llama-3.1-8b --model llama-3.1-70b --model qwen1.5-moe-a2.7b --model deepseek-v2-lite --samples 10 \
    --warmup 2 --out "$W/fine-prefill.json"
  gzip -f "$W/fine-prefill.json"
  TAIL=4 step 200 profile $B profile --no-progress --dtypes bf16 --model llama-3.1-8b --out "$W/profile.json"
  CHAT=$V/workloads/validate-chat.json
  v 8b-single-r6 90 --workload $CHAT --plan $P/llama8b-1gpu.json --model llama-3.1-8b --requests 200 --rate 6
  v six-single 60 --workload $CHAT --plan $P/llama8b-1gpu.json --model llama-3.1-8b --requests 40 --rate 8
  finish
fi
if [ "$PART" = S2 ]; then
  M=models/hardware/h200x2-nvlink.json  # topology only: bench-steps times this host's GPU 0
  TAIL=8 step 90 steps-8b $B validate --bench-steps --plan $P/llama8b-1gpu.json --model llama-3.1-8b --machine $M \
    --allow-other-host --batches 1,8,32,64 --context 1024 --prefill 2048 --out "$W/steps-8b"
  TAIL=6 step 120 torch-ref python3 .gpu-ref/torch_ref.py "$W"
  for w in fp8 int4; do
    TAIL=8 step 60 "steps-8b-$w" $B validate --bench-steps --plan $P/llama8b-1gpu.json --model llama-3.1-8b --weights $w \
      --machine $M --allow-other-host --batches 1,8,32,64 --context 1024 --prefill 0 --out "$W/steps-8b-$w"
  done
  left 330 && TAIL=4 step 100 torch-fp8-step python3 bench/quant/torch_fp8_step_ref.py "$W" llama-3.1-8b
  left 420 && PEERPLAN_PREFILL_ATTENTION=auto TAIL=6 step 120 chunk-bench .gpu/bin/cb "$W/chunk_bench.jsonl"
  left 480 && TAIL=8 step 100 torch-attn python3 .gpu-ref/torch_attn_ref.py "$W"
  [ -f "$W/chunk_bench.jsonl" ] && [ -f "$W/torch_attn_ref.json" ] && python3 scripts/gpu/attention_vs_torch.py "$W" | tee -a "$S"
  finish
fi
if [ "$PART" = S3 ]; then
  OUT=$W/moe MOE_W=$W/moe/w GG_S=45 bash bench/moe/run.sh .gpu 2>&1 | tail -n 40 | tee -a "$S" >/dev/null
  finish
fi
if [ "$PART" = S4 ]; then
  nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_throttle_reasons.active \
    --format=csv -lms 100 > "$W/clocks.csv" 2>&1 &
  CLK=$!
  for i in 1 2; do
    log "clock mark: profile-$i start $(date -u +%T.%N)"
    TAIL=2 step 150 profile-$i $B profile --no-progress --only launch_overhead,hbm,gemm,attention,elementwise \
      --dtypes bf16 --model llama-3.1-8b --out "$W/profile-$i.json"
  done
  log "clock mark: validate start $(date -u +%T.%N)"
  CHAT=$V/workloads/validate-chat.json
  cp "$W/profile-1.json" "$W/profile.json"
  v six-single 60 --workload $CHAT --plan $P/llama8b-1gpu.json --model llama-3.1-8b --requests 40 --rate 8
  log "clock mark: end $(date -u +%T.%N)"
  kill $CLK; gzip -f "$W/clocks.csv"
  python3 - "$W/profile-1.json" "$W/profile-2.json" <<'PY' | tee -a "$S"
import json, sys
a, b = (json.load(open(p))["measurements"]["gemms"] for p in sys.argv[1:])
kb = {(g["m"], g["n"], g["k"], g.get("dtype"), g.get("batch", 1)): g["median_us"] for g in b}
r = sorted(kb[k] / g["median_us"] for g in a if (k := (g["m"], g["n"], g["k"], g.get("dtype"), g.get("batch", 1))) in kb)
print(f"GEMM rows, second profile / first, same lease: n={len(r)} min {r[0]:.3f} median {r[len(r)//2]:.3f} max {r[-1]:.3f}")
for g in a:
    if g["m"] == 4096 and g["k"] == 4096 and g["n"] in (6144, 4096):
        k = (g["m"], g["n"], g["k"], g.get("dtype"), g.get("batch", 1)); print(f"  m=4096 n={g['n']} k=4096: {g['median_us']:.1f} / {kb.get(k, 0):.1f} us")
PY
  finish
fi
L=/tmp/peerplan-lease
uuids=$(nvidia-smi --query-gpu=uuid --format=csv,noheader | tr '\n' ' ')
if [ -f $L/uuids ] && [ "$(cat $L/uuids)" = "$uuids" ] && [ -f $L/profile.json ]; then
  log "same lease as an earlier call: its profile ($L/profile.json); done before: $(ls $L/done | tr '\n' ' ')"
  cp $L/profile.json "$W/profile.json"
else
  rm -rf $L; mkdir -p $L/done
  TAIL=4 step 330 profile $B profile --no-progress --dtypes bf16 --out "$W/profile.json"
  [ -f "$W/profile.json" ] && cp "$W/profile.json" $L/ && echo "$uuids" > $L/uuids
  python3 scripts/gpu/allreduce_table.py "$W/profile.json" | tee -a "$S"
fi
PR=$W/profile.json
if [ "$PART" = X1 ]; then
  MPIRUN="mpirun --allow-run-as-root --oversubscribe --bind-to none -np 2 -x NCCL_NVLS_ENABLE -x LD_LIBRARY_PATH -x PEERPLAN_HOME"
  TAIL=3 step 120 profile-mpi $MPIRUN $B profile --mpi --only nccl,peer_allreduce --no-progress --out "$W/profile-mpi.json"
  TAIL=3 step 100 torch-allreduce python3 -m torch.distributed.run --nproc_per_node 2 \
    bench/allreduce/torch_allreduce_ref.py --out "$W/torch-allreduce.json"
  python3 scripts/gpu/allreduce_table.py "$PR" "$W/profile-mpi.json" --torch "$W/torch-allreduce.json" | tee -a "$S"
  CUDA_VISIBLE_DEVICES=0 TAIL=4 step 150 selftest $B validate --self-test
  grep -ciE "fail" "$W/selftest.txt" | sed 's/^/  self-test lines with FAIL: /' | tee -a "$S"
  grep -E "peer_allreduce" "$W/selftest.txt" | head -8 | tee -a "$S"
  TAIL=12 step 60 plan-8b-allreduce $B plan --model llama-3.1-8b --machine "$PR" --allreduce nccl,custom,auto:vllm --requests 200
fi
# The plans with the all-reduce setting (P2P off runs NCCL whatever the setting).
for m in llama8b llama70b; do
  python3 -c 'import json,sys; p=json.load(open(sys.argv[1])); p["allreduce"]="custom"; p["name"]+=" ar:custom"; json.dump(p,open(sys.argv[2],"w"),indent=2)' \
    $P/$m-tp2.json "$W/$m-tp2-custom.json"
done
CHAT=$V/workloads/validate-chat.json
q() { local name=$1 t=$2; shift 2
  [ -f $L/done/$name ] && { log "  ($name: run earlier in this lease)"; return 0; }
  left $((590 - t)) || return 0
  v "$name" "$t" --workload $CHAT "$@" && touch $L/done/$name; }
issue17() {
  q 8b-tp2-nccl     60 --plan $P/llama8b-tp2.json --model llama-3.1-8b --requests 40 --rate 8
  q 8b-tp2-custom   60 --plan "$W/llama8b-tp2-custom.json" --model llama-3.1-8b --requests 40 --rate 8
  q 8b-tp2-p2p-off  60 --plan $P/llama8b-tp2.json --model llama-3.1-8b --requests 40 --rate 8 --p2p off
  q 70b-tp2-nccl    120 --plan $P/llama70b-tp2.json --model llama-3.1-70b --requests 40 --rate 8
  q 70b-tp2-custom  120 --plan "$W/llama70b-tp2-custom.json" --model llama-3.1-70b --requests 40 --rate 8
  q 70b-tp2-p2p-off 120 --plan $P/llama70b-tp2.json --model llama-3.1-70b --requests 40 --rate 8 --p2p off
}
issue16() {
  q 8b-single-r6    90 --plan $P/llama8b-1gpu.json --model llama-3.1-8b --requests 200 --rate 6
  q 8b-dp2-lo-r12   90 --plan $P/llama8b-dp2.json --model llama-3.1-8b --requests 200 --rate 12
  sed 's/least_outstanding/round_robin/' $P/llama8b-dp2.json > "$W/llama8b-dp2-rr.json"
  q 8b-dp2-rr-r12   90 --plan "$W/llama8b-dp2-rr.json" --model llama-3.1-8b --requests 200 --rate 12
  q 8b-tp2-r12      90 --plan $P/llama8b-tp2.json --model llama-3.1-8b --requests 200 --rate 12
}
six() {
  q six-single      60 --plan $P/llama8b-1gpu.json --model llama-3.1-8b --requests 40 --rate 8
  q six-pp2         60 --plan $P/llama8b-pp2.json --model llama-3.1-8b --requests 40 --rate 8
  q six-pp2-nop2p   60 --plan $P/llama8b-pp2.json --model llama-3.1-8b --requests 40 --rate 8 --p2p off
  q six-ep2         90 --plan $P/mixtral-ep2.json --model mixtral-8x7b --requests 40 --rate 8
}
# X1 ran issue 17 first (its part); later calls start with what X1 left: issue 16, then the six, then 17 again.
if [ "$PART" = X1 ]; then issue17; issue16; six; else issue16; six; issue17; fi
log "summary (targets: TTFT p50 and TPOT p50 within 5 %, E2E p99 within 10 %):"
ls -d "$W"/validate-*/ >/dev/null 2>&1 && scripts/gpu/validate_summary.sh "$W"/validate-*/ | tee -a "$S"
finish
