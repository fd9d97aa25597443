#!/usr/bin/env python3
"""Shared experts on a second stream, A/B (scripts/gpu/session21.sh A): decode step medians per model and
batch with PEERPLAN_SHARED_STREAM=0 (priced one stream) and =1 (priced with the profile's
executor_shared_stream), every round, the gain, each side's GPU / price, and batch 1 against the HBM time of
the bytes the step touches. usage: shared_stream_ab.py DIR [HBM_GBPS]"""
import glob
import json
import os
import re
import sys

d = sys.argv[1]
hbm = float(sys.argv[2]) if len(sys.argv) > 2 else 0.0
runs = {}  # (model, stream) -> {batch: [(median_us, priced_us) per round]}
hbm_bytes = {}
for p in sorted(glob.glob(os.path.join(d, "steps-*-s[01]-r[0-9]", "steps.json"))):
    m = re.match(r"steps-(.+)-s([01])-r(\d+)$", os.path.basename(os.path.dirname(p)))
    model, s = m.group(1), int(m.group(2))
    for st in json.load(open(p))["steps"]:
        if st["step"] != "decode":
            continue
        runs.setdefault((model, s), {}).setdefault(st["batch"], []).append((st["median_us"], st.get("priced_us", 0)))
        hbm_bytes[(model, st["batch"])] = st.get("hbm_bytes", 0)


def mid(v):
    v = sorted(v)
    return v[len(v) // 2] if v else float("nan")


for model in sorted({k[0] for k in runs}):
    off, on = runs.get((model, 0), {}), runs.get((model, 1), {})
    print(f"\n{model}: decode step, context 1024, CUDA graphs; ms (rounds), GPU / price")
    print(f"  {'batch':>5} {'one stream':>24} {'GPU/pr':>6} {'shared on 2nd':>24} {'GPU/pr':>6} {'on/off':>7}"
          + ("  on vs HBM bound" if hbm else ""))
    for b in sorted(set(off) | set(on)):
        a, c = off.get(b, []), on.get(b, [])
        ma, mc = mid([x[0] for x in a]) / 1e3, mid([x[0] for x in c]) / 1e3
        pa, pc = mid([x[1] for x in a]) / 1e3, mid([x[1] for x in c]) / 1e3
        rounds = lambda v: "(" + " ".join(f"{x[0] / 1e3:.3f}" for x in v) + ")"
        bound = hbm_bytes.get((model, b), 0) / (hbm * 1e9) * 1e3 if hbm else 0
        extra = f"  {mc / bound:.2f}x of {bound:.3f}" if bound else ""
        print(f"  {b:>5} {ma:>7.3f} {rounds(a):>16} {ma / pa if pa else float('nan'):>6.3f} {mc:>7.3f} {rounds(c):>16} "
              f"{mc / pc if pc else float('nan'):>6.3f} {mc / ma:>7.3f}{extra}")
