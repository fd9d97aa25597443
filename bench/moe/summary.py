"""Summary of bench/moe/run.sh's outputs (OUT): decode step times of the executor beside the PyTorch
reference per batch, the B=1 HBM bound (touched bytes / measured HBM bandwidth), and PASS/FAIL for
issue 14's criteria: executor <= reference at every batch; executor at B=1 <= 1.25 x the bound.
Also the grouped-GEMM kernel choice evidence from the profile, the prefill-sized groups (our kernel,
cuBLASLt per expert, the executor's dispatch) and the prefill step without the dispatch's cuBLAS path
(run.sh's PREFILL_AB), and batch 1 with the residual adds unfused (UNFUSED_AB). usage: summary.py OUTDIR"""
import json
import os
import sys

out = sys.argv[1]
MODELS = ["qwen1.5-moe-a2.7b", "mixtral-8x7b"]


def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError) as ex:
        print(f"missing {path}: {ex}")
        return None


hprof = load(os.path.join(out, "profile-hbm.json")) or {}
hbm = max(hprof.get("measurements", hprof).get("hbm_gbps", [0]) or [0])
prof = load(os.path.join(out, "profile-grouped.json")) or {}
ref = load(os.path.join(out, "torch_moe_fp8_ref.json")) or {}
print(f"GPU: {ref.get('gpu', '?')}  torch {ref.get('torch', '?')}  measured HBM {hbm:.0f} GB/s (D2D copy, read+write)")
ok_all = True
for m in MODELS:
    steps = load(os.path.join(out, f"steps-{m}", "steps.json"))
    if not steps:
        ok_all = False
        continue
    r = ref.get(m, {})
    # run.sh's A/B: the prefill step with every expert GEMM on the grouped kernel (PEERPLAN_MOE_CUBLAS_MIN_GFLOP=1e30)
    grouped_only = {}
    gpath = os.path.join(out, f"steps-{m}-grouped", "steps.json")
    if os.path.exists(gpath):
        g = load(gpath) or {}
        grouped_only = {s.get("context"): s["median_us"] for s in g.get("steps", []) if s.get("step") == "prefill"}
    # run.sh's UNFUSED_AB: batch 1 with the residual adds as kernels of their own (the executor before session 15)
    unfused = {}
    upath = os.path.join(out, f"steps-{m}-unfused", "steps.json")
    if os.path.exists(upath):
        u = load(upath) or {}
        unfused = {s["batch"]: s["median_us"] for s in u.get("steps", []) if s.get("step") == "decode"}
    print(f"\n{m}: decode step, context 1024, CUDA graphs")
    print(f"  {'batch':>5} {'executor ms':>12} {'reference ms':>13} {'ratio':>7} {'HBM MB':>9} {'bound ms':>9}")
    for s in steps["steps"]:
        if s["step"] != "decode":
            if s["step"] == "prefill":
                g = grouped_only.get(s.get("context"))
                ab = (f" (every expert GEMM on the grouped kernel: {g / 1e3:.2f} ms; dispatch speed-up "
                      f"{g / s['median_us']:.2f}x)" if g else "")
                print(f"  prefill {s.get('context')} tokens: executor {s['median_us'] / 1e3:.2f} ms{ab}")
            continue
        b = s["batch"]
        ex = s["median_us"] / 1e3
        rr = r.get(f"decode_b{b}_ctx1024", {}).get("graph", {}).get("median_ms")
        bound = s.get("hbm_bytes", 0) / (hbm * 1e9) * 1e3 if hbm else 0
        ratio = ex / rr if rr else float("nan")
        print(f"  {b:>5} {ex:>12.3f} {rr if rr else float('nan'):>13.3f} {ratio:>7.2f} {s.get('hbm_bytes', 0) / 1e6:>9.1f} {bound:>9.3f}")
        if rr is not None:
            ok = ex <= rr
            ok_all &= ok
            print(f"  {'PASS' if ok else 'FAIL'} {m} b={b}: executor {ex:.3f} ms vs reference {rr:.3f} ms")
        if b in unfused:
            print(f"  b={b} with separate residual-add kernels: {unfused[b] / 1e3:.3f} ms (the fused norm saves "
                  f"{(unfused[b] - s['median_us']) / 1e3:.3f} ms, {100 * (1 - s['median_us'] / unfused[b]):.1f} %)")
        if b == 1 and bound > 0:
            ok = ex <= 1.25 * bound
            ok_all &= ok
            print(f"  {'PASS' if ok else 'FAIL'} {m} b=1: executor {ex:.3f} ms vs 1.25 x HBM bound {1.25 * bound:.3f} ms "
                  f"({ex / bound:.2f} x bound)")
gg = prof.get("measurements", prof).get("extra", {}).get("grouped_gemm", {}) if prof else {}
if gg.get("kernel_choice"):
    print("\ngrouped GEMM kernels (us per call; 0 stream16, 1 stream32, 2 tiled64; chosen by max_rows)")
    for e in gg["kernel_choice"]:
        print(f"  n={e['n']:>6} k={e['k']:>5} experts={e['experts']:>3} tokens={e['tokens']:>5} max_rows={e['max_rows']:>4} "
              f"chosen={e['chosen']} " + " ".join(f"{e.get(f'kind{i}_us', 0):8.1f}" for i in range(3)) +
              f"  weights {e.get('weights_gbps', 0):.0f} GB/s")
if gg.get("vs_cublas_per_expert"):
    # dispatch: what the executor now runs (profiler/kernels/moe_expert_gemm.hpp): eager calls above the
    # CUDA-graph batch may take cuBLASLt per expert, paying the offsets' copy, a host sync and gate_up's
    # row gather, all inside the figure; its path and the rule in force are printed beside it.
    dsp = gg.get("dispatch", {})
    print("\nprefill-sized groups: our kernel vs cuBLASLt per expert (host-known sizes) vs the executor's dispatch, "
          "us per call")
    if dsp:
        print(f"  dispatch rule ({dsp.get('min_gflop_source', '?')}: {dsp.get('min_gflop', '?')} GFLOP per expert): "
              f"{dsp.get('rule', '?')}")
    for e in gg["vs_cublas_per_expert"]:
        d = e.get("dispatch_us")
        extra = f"  dispatch {d:9.1f} ({e.get('dispatch_path', '?')}; ours / dispatch {e['ours_us'] / d:.2f})" if d else ""
        print(f"  n={e['n']:>6} k={e['k']:>5} experts={e['experts']:>3} tokens={e['tokens']:>5} rows={e['rows']:>6} "
              f"ours {e['ours_us']:9.1f}  cublas {e['cublas_per_expert_us']:9.1f}" + extra)
print(f"\nOVERALL {'PASS' if ok_all else 'FAIL'}")
