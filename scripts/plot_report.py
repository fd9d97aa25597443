#!/usr/bin/env python3
"""Draw the plots of a `peerplan plan --report DIR` report.

Reads DIR/search.json and DIR/metrics/*.json (the metrics JSON of the top plans, with per-request
timings) and writes:
  latency_cdf.png  TTFT and end-to-end latency CDFs, one line per plan
  time_split.png   where each plan's GPU time goes: compute / communication / sync / idle
  link_util.png    utilisation of the busiest links of each plan
  pareto.png       tokens/s per GPU against tokens/s per user (1 / TPOT p50): every ranked plan as
                   a point, the Pareto front (search.json "pareto") as a line, the recommended plan marked

Usage: python3 scripts/plot_report.py DIR
"""
import json
import os
import sys

try:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
except ImportError:
    sys.exit("plot_report.py needs matplotlib (pip install matplotlib, or apt install python3-matplotlib)")


def load(path):
    with open(path) as f:
        return json.load(f)


def cdf(ax, values, label):
    v = sorted(values)
    if not v:
        return
    n = len(v)
    ax.plot(v, [(i + 1) / n for i in range(n)], label=label, linewidth=1.4)


def main(d):
    search = load(os.path.join(d, "search.json"))
    index = load(os.path.join(d, "metrics", "index.json"))
    plans = []
    for e in index:
        m = load(os.path.join(d, e["file"]))
        plans.append((e["rank"], e["plan"], m))
    source = search.get("provenance", {})
    origin = f"{source.get('machine', '?')} ({source.get('origin', '?')}" + (
        f", {source['date']})" if source.get("date") else ")")

    # 1. Latency CDFs.
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(12, 4.5))
    for rank, name, m in plans:
        r = m.get("per_request", {})
        arr, ft, fin = r.get("arrival_us", []), r.get("first_token_us", []), r.get("finish_us", [])
        ttft = [(f - a) / 1e3 for a, f in zip(arr, ft) if f >= 0]
        e2e = [(f - a) / 1e6 for a, f in zip(arr, fin) if f >= 0]
        cdf(a1, ttft, f"#{rank} {name}")
        cdf(a2, e2e, f"#{rank} {name}")
    a1.set_xlabel("TTFT (ms)")
    a2.set_xlabel("end-to-end latency (s)")
    for a in (a1, a2):
        a.set_ylabel("fraction of requests")
        a.grid(alpha=0.3)
    a1.set_xscale("log")
    a2.legend(fontsize=7, loc="lower right")
    fig.suptitle(f"Latency CDF per plan — predicted on {origin}")
    fig.tight_layout()
    fig.savefig(os.path.join(d, "latency_cdf.png"), dpi=120)
    plt.close(fig)

    # 2. Time split (summed over each plan's GPUs).
    fig, ax = plt.subplots(figsize=(max(6, 0.9 * len(plans) + 3), 4.5))
    parts = [("compute_us", "compute", "#4C72B0"), ("communication_us", "communication", "#DD8452"),
             ("sync_us", "sync / launch", "#55A868"), ("idle_us", "idle", "#CCCCCC")]
    names = []
    bottoms = [0.0] * len(plans)
    for key, label, color in parts:
        vals = []
        for i, (rank, name, m) in enumerate(plans):
            gpus = [g for g in m.get("gpus", []) if g["compute_us"] + g["communication_us"] + g["sync_us"] > 0]
            tot = sum(g["compute_us"] + g["communication_us"] + g["sync_us"] + g["idle_us"] for g in gpus) or 1
            vals.append(sum(g[key] for g in gpus) / tot)
        ax.bar(range(len(plans)), vals, bottom=bottoms, label=label, color=color)
        bottoms = [b + v for b, v in zip(bottoms, vals)]
    names = [f"#{r} {n}" for r, n, _ in plans]
    ax.set_xticks(range(len(plans)))
    ax.set_xticklabels(names, rotation=30, ha="right", fontsize=8)
    ax.set_ylabel("share of GPU time")
    ax.set_ylim(0, 1)
    ax.legend(fontsize=8)
    ax.set_title("Where GPU time goes (simulated)")
    fig.tight_layout()
    fig.savefig(os.path.join(d, "time_split.png"), dpi=120)
    plt.close(fig)

    # 3. Link utilisation: the 6 busiest links of each plan.
    fig, ax = plt.subplots(figsize=(10, 4.5))
    labels, vals, colors = [], [], []
    palette = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for i, (rank, name, m) in enumerate(plans):
        for l in m.get("links", [])[:6]:
            labels.append(f"#{rank} {l['link']}")
            vals.append(100 * l["utilisation"])
            colors.append(palette[i % len(palette)])
    if vals:
        ax.barh(range(len(vals)), vals, color=colors)
        ax.set_yticks(range(len(vals)))
        ax.set_yticklabels(labels, fontsize=7)
        ax.invert_yaxis()
        ax.set_xlabel("utilisation over the run (%)")
    else:
        ax.text(0.5, 0.5, "no plan moves data over links (single-GPU plans only)", ha="center", va="center")
        ax.set_axis_off()
    ax.set_title("Link utilisation (busiest links per plan)")
    fig.tight_layout()
    fig.savefig(os.path.join(d, "link_util.png"), dpi=120)
    plt.close(fig)

    pareto(d, search)


def pareto(d, search):
    """Tokens/s per GPU against tokens/s per user, with the front the planner computed."""
    pts = []
    for e in search.get("ranked", []):
        m = e.get("metrics", {})
        gpus = e.get("gpus") or 1
        tpot_us = m.get("tpot", {}).get("p50_us", 0)
        pts.append((e["rank"], e["plan"].get("name", "?") if isinstance(e.get("plan"), dict) else str(e.get("plan")),
                    1e6 / tpot_us if tpot_us > 0 else 0.0, m.get("output_tokens_per_s", 0.0) / gpus))
    fig, ax = plt.subplots(figsize=(7.5, 5))
    if pts:
        ax.scatter([p[2] for p in pts], [p[3] for p in pts], s=22, color="#8C8C8C", label="plans", zorder=2)
        front = sorted(search.get("pareto", []), key=lambda f: f["tokens_per_s_per_user"])
        if front:
            ax.plot([f["tokens_per_s_per_user"] for f in front], [f["tokens_per_s_per_gpu"] for f in front],
                    "-o", color="#C44E52", markersize=5, linewidth=1.6, label="Pareto front", zorder=3)
            for f in front:
                ax.annotate(f"#{f['rank']} {f['plan']}", (f["tokens_per_s_per_user"], f["tokens_per_s_per_gpu"]),
                            fontsize=7, xytext=(4, 4), textcoords="offset points")
        rec = search.get("recommended")
        for rank, name, user, gpu in pts:
            if name == rec:
                ax.scatter([user], [gpu], s=160, marker="*", color="#DD8452", edgecolor="black", zorder=4,
                           label=f"recommended (#{rank})")
                break
        ax.set_xlabel("tokens/s per user (1 / TPOT p50)")
        ax.set_ylabel("output tokens/s per GPU")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    else:
        ax.text(0.5, 0.5, "no plan was simulated", ha="center", va="center")
        ax.set_axis_off()
    ax.set_title("Throughput per GPU against speed per user (simulated)")
    fig.tight_layout()
    fig.savefig(os.path.join(d, "pareto.png"), dpi=120)
    plt.close(fig)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
