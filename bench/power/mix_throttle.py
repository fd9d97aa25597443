#!/usr/bin/env python3
"""How a long prefill's mix of attention and GEMMs slows under the power cap, class by class (session 16:
the pricer's one GEMM factor, 1.186, over-slowed 8B long chunks that ran 1.13-1.15x their boost price at
~1665 MHz, attention 1.18x and GEMMs 1.11x; docs/simulator.md "Power").

  mix_throttle.py OUT_DIR   for attention shares of ~0, 25, 50, 75 and 100 % of the time: 0.5 s idle, then
                            ~1.5 s of 8B-shaped work back to back, rounds of G GEMMs (M 4096 x 6144 x 4096,
                            torch.matmul, weights rotating) and A causal-chunk attentions (torch SDPA, 32/8
                            heads, d 128, causal 8192 x 8192, bf16), each call timed by CUDA
                            events, NVML beside it; per class boost (calls starting in the first 15 ms) and
                            sustained (last 40 %) medians, the factor, the SM clock and power sustained.
                            Writes OUT_DIR/mix_throttle.json and prints a table.

The data a per-class throttle model needs (which factor each class takes at which mix); torch stands in for the
executor's kernels (cuBLASLt and cuDNN both), as clock_response.py does.
"""
import json
import os
import statistics
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from clock_response import Nvml, Sampler  # noqa: E402


def run(out_dir):
    dev = torch.device("cuda")
    M, N, K, COPIES = 4096, 6144, 4096, 4
    x = torch.randn(M, K, device=dev, dtype=torch.bfloat16)
    ws = [torch.randn(N, K, device=dev, dtype=torch.bfloat16) for _ in range(COPIES)]
    H, KV, D, Q, CTX = 32, 8, 128, 8192, 8192
    q = torch.randn(1, H, Q, D, device=dev, dtype=torch.bfloat16)
    k = torch.randn(1, KV, CTX, D, device=dev, dtype=torch.bfloat16)
    v = torch.randn_like(k)
    gemm = lambda i: torch.matmul(x, ws[i % COPIES].t())
    # A memory-bound elementwise call (a SiLU-mul of 4096 x 14336, ~350 MB moved) once a round: the third class.
    ea, eb = torch.randn(4096, 14336, device=dev, dtype=torch.bfloat16), torch.randn(4096, 14336, device=dev, dtype=torch.bfloat16)
    elem = lambda i: F.silu(ea) * eb
    # Causal prefill of 8192 tokens (torch's fastest backend: flash or cuDNN), grouped-query heads.
    attn = lambda i: F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
    for f in (gemm, attn, elem):
        for i in range(3):
            f(i)
    torch.cuda.synchronize()

    def one_ms(f):
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record()
        for i in range(5):
            f(i)
        e1.record()
        e1.synchronize()
        return e0.elapsed_time(e1) / 5

    g_ms, a_ms = one_ms(gemm), one_ms(attn)
    nvml = Nvml()
    results = []
    for share in (0.0, 0.25, 0.5, 0.75, 1.0):
        # G GEMMs and A attentions a round, so that A * a_ms / (A * a_ms + G * g_ms) ~ share.
        if share == 0.0:
            G, A = 4, 0
        elif share == 1.0:
            G, A = 0, 1
        else:
            A = 1
            G = max(1, round(a_ms * (1 - share) / share / g_ms))
        rounds = max(20, int(1500 / (G * g_ms + A * a_ms)))
        time.sleep(0.5)
        smp = Sampler(nvml, 0.002)
        smp.start()
        calls = []  # (class, start event, end event)
        n = 0
        for _ in range(rounds):
            for cls, f, cnt in (("gemm", gemm, G), ("attention", attn, A), ("elementwise", elem, 1)):
                for _ in range(cnt):
                    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                    e0.record()
                    f(n)
                    e1.record()
                    calls.append((cls, e0, e1))
                    n += 1
        torch.cuda.synchronize()
        smp.stop = True
        smp.join()
        t0 = calls[0][1]
        row = {"target_share": share, "gemms_per_round": G, "attentions_per_round": A, "rounds": rounds}
        total = {"gemm": 0.0, "attention": 0.0, "elementwise": 0.0}
        for cls in ("gemm", "attention", "elementwise"):
            c = [(t0.elapsed_time(e0), e0.elapsed_time(e1)) for k_, e0, e1 in calls if k_ == cls]
            if not c:
                continue
            total[cls] = sum(d for _, d in c)
            boost = [d for s, d in c if s < 15.0] or [c[0][1]]
            tail = [d for _, d in c[int(len(c) * 0.6):]]
            b, s = statistics.median(boost), statistics.median(tail)
            row[cls] = {"boost_ms": b, "sustained_ms": s, "factor": s / b, "calls": len(c)}
        row["attention_share"] = total["attention"] / max(1e-9, total["gemm"] + total["attention"])
        busy = [r for r in smp.rows[len(smp.rows) * 6 // 10:] if r[2] > 200]
        row["sustained_sm_mhz"] = statistics.median([r[1] for r in busy]) if busy else None
        row["sustained_power_w"] = statistics.median([r[2] for r in busy]) if busy else None
        results.append(row)
    doc = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
           "gemm": {"m": M, "n": N, "k": K}, "attention": {"heads": H, "kv_heads": KV, "head_dim": D, "q": Q, "context": CTX},
           "gemm_ms_at_start": g_ms, "attention_ms_at_start": a_ms, "mixes": results}
    with open(os.path.join(out_dir, "mix_throttle.json"), "w") as f:
        json.dump(doc, f, indent=1)
    print(f"GEMM {g_ms:.3f} ms, attention {a_ms:.3f} ms a call at start")
    print("attention share   GEMM factor   attention factor   elementwise factor   SM MHz   W   (sustained: last 40 % of ~1.5 s)")
    fmt = lambda v: "-" if v is None else f"{v:.3f}"
    for r in results:
        gf, af, ef = (r.get(c, {}).get("factor") for c in ("gemm", "attention", "elementwise"))
        print(f"  {r['attention_share']:6.2f}        {fmt(gf):>8}      {fmt(af):>8}          {fmt(ef):>8}        "
              f"{r['sustained_sm_mhz']}   {r['sustained_power_w']}")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    run(sys.argv[1])
