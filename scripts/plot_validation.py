#!/usr/bin/env python3
"""Plot a `peerplan validate --out DIR` report: predicted vs measured per metric (left) and the
latency CDFs of both runs (right). Writes DIR/validation.png.

usage: plot_validation.py DIR
"""
import json
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def per_request(metrics):
    r = metrics.get("per_request") or {}
    ttft, tpot = [], []
    for a, f, e, n in zip(r.get("arrival_us", []), r.get("first_token_us", []), r.get("finish_us", []),
                          r.get("output_tokens", [])):
        if f < 0 or e < 0:
            continue
        ttft.append((f - a) / 1e3)
        if n > 1:
            tpot.append((e - f) / (n - 1) / 1e3)
    return sorted(ttft), sorted(tpot)


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    d = Path(sys.argv[1])
    v = json.loads((d / "validation.json").read_text())
    pred = json.loads((d / "predicted.metrics.json").read_text())
    meas = json.loads((d / "measured.metrics.json").read_text())
    rows = [r for r in v["rows"] if "predicted_us" in r]
    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(13, 5))
    p = [r["predicted_us"] / 1e3 for r in rows]
    m = [r["measured_us"] / 1e3 for r in rows]
    ax.scatter(m, p, color="tab:blue")
    for r, x, y in zip(rows, m, p):
        ax.annotate(f'{r["metric"]} {100 * (r["rel_error"] or 0):+.1f}%', (x, y), fontsize=7,
                    textcoords="offset points", xytext=(4, 2))
    lo, hi = min(m + p) * 0.8, max(m + p) * 1.25
    ax.plot([lo, hi], [lo, hi], "k--", lw=0.8, label="predicted = measured")
    ax.fill_between([lo, hi], [lo * 0.95, hi * 0.95], [lo * 1.05, hi * 1.05], color="green", alpha=0.12, label="±5 %")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("measured (ms)")
    ax.set_ylabel("predicted (ms)")
    ax.set_title(f'{v["plan"]} · {v["model"]} · {v["workload"]}')
    ax.legend(loc="upper left", fontsize=8)
    for metrics, style, name in ((pred, "--", "predicted"), (meas, "-", "measured")):
        ttft, tpot = per_request(metrics)
        for vals, color, what in ((ttft, "tab:orange", "TTFT"), (tpot, "tab:purple", "TPOT")):
            if vals:
                ys = [(i + 1) / len(vals) for i in range(len(vals))]
                ax2.plot(vals, ys, style, color=color, label=f"{what} {name}")
    ax2.set_xscale("log")
    ax2.set_xlabel("latency (ms)")
    ax2.set_ylabel("fraction of requests")
    ax2.set_title("latency CDF")
    ax2.legend(fontsize=8)
    ctx = v.get("context", {})
    fig.suptitle(f'{", ".join(ctx.get("gpus", []))}  CUDA {ctx.get("cuda_runtime", "?")}  NCCL {ctx.get("nccl", "?")}'
                 f'  p2p {"on" if ctx.get("p2p", True) else "off"}  {ctx.get("date", "")}', fontsize=9)
    fig.tight_layout()
    fig.savefig(d / "validation.png", dpi=110)


if __name__ == "__main__":
    main()
