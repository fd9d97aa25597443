#!/usr/bin/env python3
"""Shared experts on a second stream, A/B (scripts/gpu/session21.sh A): decode step medians per model and
batch with PEERPLAN_SHARED_STREAM=0 and =1 (two rounds each, interleaved), the gain, and batch 1 against
the HBM time of the bytes the step touches. usage: shared_stream_ab.py DIR [HBM_GBPS]"""
import glob
import json
import os
import re
import sys

d = sys.argv[1]
hbm = float(sys.argv[2]) if len(sys.argv) > 2 else 0.0
runs = {}  # (model, stream) -> {batch: [median_us per round]}
hbm_bytes = {}
for p in sorted(glob.glob(os.path.join(d, "steps-*-s[01]-r[0-9]", "steps.json"))):
    m = re.match(r"steps-(.+)-s([01])-r(\d+)$", os.path.basename(os.path.dirname(p)))
    model, s = m.group(1), int(m.group(2))
    for st in json.load(open(p))["steps"]:
        if st["step"] != "decode":
            continue
        runs.setdefault((model, s), {}).setdefault(st["batch"], []).append(st["median_us"])
        hbm_bytes[(model, st["batch"])] = st.get("hbm_bytes", 0)
for model in sorted({k[0] for k in runs}):
    off, on = runs.get((model, 0), {}), runs.get((model, 1), {})
    print(f"\n{model}: decode step median, context 1024, CUDA graphs (rounds in brackets)")
    print(f"  {'batch':>5} {'one stream ms':>22} {'shared on 2nd ms':>22} {'on/off':>7}" + ("  on / HBM bound" if hbm else ""))
    for b in sorted(set(off) | set(on)):
        a, c = off.get(b, []), on.get(b, [])
        ma = sorted(a)[len(a) // 2] / 1e3 if a else float("nan")
        mc = sorted(c)[len(c) // 2] / 1e3 if c else float("nan")
        rounds = lambda v: "[" + " ".join(f"{x / 1e3:.3f}" for x in v) + "]"
        bound = hbm_bytes.get((model, b), 0) / (hbm * 1e9) * 1e3 if hbm else 0
        extra = f"  {mc / bound:.2f}x of {bound:.3f}" if bound else ""
        print(f"  {b:>5} {ma:>7.3f} {rounds(a):>14} {mc:>7.3f} {rounds(c):>14} {mc / ma:>7.3f}{extra}")
