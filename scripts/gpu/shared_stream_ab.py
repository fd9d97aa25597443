#!/usr/bin/env python3
"""Shared experts on a second stream, A/B (scripts/gpu/session21.sh A): per round (r1: priced from the shipped
profile, r2: from the lease's own, its copy with executor_shared_stream pricing the two-stream side), decode
step medians per model and batch with PEERPLAN_SHARED_STREAM=0 and =1, the gain, each side's GPU / price, and
the two-stream step against the HBM time of the bytes it touches. usage: shared_stream_ab.py DIR [HBM_GBPS]"""
import glob
import json
import os
import re
import sys

d = sys.argv[1]
hbm = float(sys.argv[2]) if len(sys.argv) > 2 else 0.0
runs = {}  # (round, model, stream) -> {batch: (median_us, priced_us)}
hbm_bytes = {}
for p in sorted(glob.glob(os.path.join(d, "steps-*-s[01]-r[0-9]", "steps.json"))):
    m = re.match(r"steps-(.+)-s([01])-r(\d+)$", os.path.basename(os.path.dirname(p)))
    model, s, r = m.group(1), int(m.group(2)), int(m.group(3))
    for st in json.load(open(p))["steps"]:
        if st["step"] == "decode":
            runs.setdefault((r, model, s), {})[st["batch"]] = (st["median_us"], st.get("priced_us", 0))
            hbm_bytes[(model, st["batch"])] = st.get("hbm_bytes", 0)
for r in sorted({k[0] for k in runs}):
    print(f"\nround r{r} ({'priced from the shipped profile' if r == 1 else 'priced from this GPU' + chr(39) + 's profile'})")
    for model in sorted({k[1] for k in runs if k[0] == r}):
        off, on = runs.get((r, model, 0), {}), runs.get((r, model, 1), {})
        print(f"  {model}: decode step, context 1024, CUDA graphs (ms; GPU / price)")
        print(f"    {'batch':>5} {'one stream':>10} {'GPU/pr':>7} {'2 streams':>10} {'GPU/pr':>7} {'2/1':>6}"
              + ("  2 streams vs HBM bound" if hbm else ""))
        for b in sorted(set(off) | set(on)):
            (ma, pa), (mc, pc) = off.get(b, (float("nan"), 0)), on.get(b, (float("nan"), 0))
            bound = hbm_bytes.get((model, b), 0) / (hbm * 1e9) * 1e6 if hbm else 0
            extra = f"  {mc / bound:.2f}x of {bound / 1e3:.3f}" if bound else ""
            print(f"    {b:>5} {ma / 1e3:>10.3f} {ma / pa if pa else float('nan'):>7.3f} {mc / 1e3:>10.3f} "
                  f"{mc / pc if pc else float('nan'):>7.3f} {mc / ma:>6.3f}{extra}")
