#!/usr/bin/env python3
"""Plots of a peerplan profile (machine JSON with measurements).

  scripts/plot_profile.py models/hardware/h200x2-nvlink.json --out docs/profile

writes
  bandwidth.png   GB/s vs transfer size, one panel per mode (every pair / GPU a line)
  p2p_matrix.png  heatmap of copy-engine peer bandwidth at the largest size (src row, dst column),
                  with peer-access state (no access / broken) marked in the cells
  nccl.png        NCCL busBw vs size per collective, P2P on (solid) and off (dashed)
"""
import argparse
import json
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

MODE_TITLES = {
    "p2p_ce": "peer copy, copy engine",
    "p2p_ce_bidir": "peer copy, CE, both directions (per direction)",
    "p2p_sm_read": "peer read by SM kernel",
    "p2p_sm_write": "peer write by SM kernel",
    "nop2p_runtime": "cudaMemcpyPeer, peer access off",
    "host_staged": "host-staged (D2H + H2D, pipelined)",
    "h2d": "host to device (pinned)",
    "d2h": "device to host (pinned)",
    "d2d": "device-local copy",
}


def endpoint(i):
    return "host" if i < 0 else f"gpu{i}"


def gbps(points):
    xs = [p["bytes"] for p in points]
    ys = [p["bytes"] / (p["median_us"] * 1e-6) / 1e9 for p in points]
    return xs, ys


def size_label(b):
    for unit, div in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if b >= div:
            return f"{b / div:g} {unit}"
    return f"{b} B"


def plot_bandwidth(prof, out):
    transfers = prof["measurements"].get("transfers", [])
    modes = [m for m in MODE_TITLES if any(t["mode"] == m for t in transfers)]
    if not modes:
        return None
    cols = 3
    rows = (len(modes) + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(5.2 * cols, 3.8 * rows), squeeze=False)
    for ax, mode in zip(axes.flat, modes):
        for t in transfers:
            if t["mode"] != mode:
                continue
            xs, ys = gbps(t["points"])
            label = f"{endpoint(t['src'])}→{endpoint(t['dst'])}" + (f" {t['variant']}" if t.get("variant") else "")
            ax.plot(xs, ys, marker=".", label=label)
        ax.set_xscale("log", base=2)
        ax.set_title(MODE_TITLES[mode], fontsize=10)
        ax.set_xlabel("transfer size (bytes)")
        ax.set_ylabel("GB/s (median)")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
    for ax in list(axes.flat)[len(modes):]:
        ax.axis("off")
    fig.suptitle(f"{prof.get('name', '')}: bandwidth vs size ({prof.get('date', '')})")
    fig.tight_layout()
    path = os.path.join(out, "bandwidth.png")
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot_p2p_matrix(prof, out):
    n = len(prof["gpus"])
    ms = prof["measurements"]
    mat = [[float("nan")] * n for _ in range(n)]
    for t in ms.get("transfers", []):
        if t["mode"] == "p2p_ce" and t["points"]:
            mat[t["src"]][t["dst"]] = gbps(t["points"])[1][-1]
        if t["mode"] == "d2d" and t["points"]:
            mat[t["src"]][t["dst"]] = gbps(t["points"])[1][-1]
    p2p = prof.get("p2p")
    fig, ax = plt.subplots(figsize=(1.6 * n + 2.5, 1.4 * n + 1.8))
    im = ax.imshow(mat, cmap="viridis")
    for i in range(n):
        for j in range(n):
            txt = "" if mat[i][j] != mat[i][j] else f"{mat[i][j]:.0f}"
            if i != j and isinstance(p2p, list):
                cell = p2p[i][j]
                access = cell.get("access", cell) if isinstance(cell, dict) else cell
                if not access:
                    txt = "no P2P"
                elif isinstance(cell, dict) and cell.get("functional") is False:
                    txt = "BROKEN"
            if i == j and txt:
                txt += "\n(local)"
            ax.text(j, i, txt, ha="center", va="center", color="w", fontsize=9)
    ax.set_xticks(range(n), [f"gpu{j}" for j in range(n)])
    ax.set_yticks(range(n), [f"gpu{i}" for i in range(n)])
    ax.set_xlabel("destination")
    ax.set_ylabel("source")
    ax.set_title("copy-engine GB/s at the largest size")
    fig.colorbar(im, ax=ax, label="GB/s")
    fig.tight_layout()
    path = os.path.join(out, "p2p_matrix.png")
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


BUS_FACTOR = {
    "all_reduce": lambda n: 2 * (n - 1) / n,
    "all_gather": lambda n: (n - 1) / n,
    "reduce_scatter": lambda n: (n - 1) / n,
    "all_to_all": lambda n: (n - 1) / n,
    "send_recv": lambda n: 1.0,
    "broadcast": lambda n: 1.0,
}


def plot_nccl(prof, out):
    colls = prof["measurements"].get("collectives", [])
    if not colls:
        return None
    fig, ax = plt.subplots(figsize=(8, 5))
    colors = {}
    for c in colls:
        n = len(c["gpus"])
        xs, ys = gbps(c["points"])
        ys = [y * BUS_FACTOR[c["op"]](n) for y in ys]
        key = c["op"]
        color = colors.setdefault(key, f"C{len(colors)}")
        label = f"{c['op']} [{','.join(map(str, c['gpus']))}]" + ("" if c.get("p2p", True) else " P2P off")
        ax.plot(xs, ys, ls="-" if c.get("p2p", True) else "--", color=color, label=label, marker=".")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("size (bytes, nccl-tests convention)")
    ax.set_ylabel("busBw GB/s (median)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7, ncol=2)
    ax.set_title(f"NCCL collectives, {prof['measurements'].get('meta', {}).get('nccl', '')}")
    fig.tight_layout()
    path = os.path.join(out, "nccl.png")
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("profile", help="a peerplan profile (machine JSON with measurements)")
    ap.add_argument("--out", default=".", help="folder for the PNG files")
    a = ap.parse_args()
    try:
        with open(a.profile) as f:
            prof = json.load(f)
    except (OSError, json.JSONDecodeError) as e:
        sys.exit(f"plot_profile: cannot read {a.profile}: {e}")
    if "measurements" not in prof:
        sys.exit(f"plot_profile: {a.profile} has no 'measurements' (a nominal machine?); run `peerplan profile` first")
    os.makedirs(a.out, exist_ok=True)
    for p in (plot_bandwidth(prof, a.out), plot_p2p_matrix(prof, a.out), plot_nccl(prof, a.out)):
        if p:
            print("wrote", p)


if __name__ == "__main__":
    main()
