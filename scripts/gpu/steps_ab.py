#!/usr/bin/env python3
"""Decode-step A/B tables from a device call's `validate --bench-steps` outputs (call_lib.sh `bench`).

  steps_ab.py DIR [--diff A B ...] [--layers N]

Reads DIR/steps-<name>-<seconds>.txt (one per bench call; the same name run twice is two rounds), averages each
(name, batch)'s median over rounds, and prints one row per name: the mean median in ms at each batch and the price
beside it. --diff A B prints (A - B) per batch, in us and, with --layers N, in us per layer: what one setting adds
over another (the shared branch on one stream: s0 - s0-noshared)."""
import argparse
import collections
import glob
import os
import re
import sys


def read(d):
    runs = collections.defaultdict(lambda: collections.defaultdict(list))  # name -> batch -> [(median, price)]
    for f in sorted(glob.glob(os.path.join(d, "steps-*.txt"))):
        m = re.match(r"steps-(.+)-(\d+)\.txt$", os.path.basename(f))
        if not m:
            continue
        for line in open(f):
            p = line.split()
            if len(p) >= 12 and p[0] == "decode" and p[5] == "ms":
                runs[m.group(1)][int(p[1])].append((float(p[4]), float(p[-3])))
    return runs


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dir")
    ap.add_argument("--diff", nargs=2, action="append", default=[], metavar=("A", "B"))
    ap.add_argument("--layers", type=int, default=0)
    a = ap.parse_args()
    runs = read(a.dir)
    if not runs:
        sys.exit(f"steps_ab.py: no steps-<name>-<seconds>.txt with decode rows in {a.dir}")
    batches = sorted({b for r in runs.values() for b in r})
    mean = {n: {b: sum(x[0] for x in v) / len(v) for b, v in r.items()} for n, r in runs.items()}
    print("%-24s %6s " % ("setting", "rounds") + " ".join("%17s" % f"b={b} ms (price)" for b in batches))
    for n in sorted(runs):
        cells = []
        for b in batches:
            v = runs[n].get(b)
            cells.append("%17s" % (f"{mean[n][b]:.3f} ({v[0][1]:.3f})" if v else "-"))
        print("%-24s %6d " % (n, max(len(v) for v in runs[n].values())) + " ".join(cells))
    for x, y in a.diff:
        if x not in mean or y not in mean:
            sys.exit(f"steps_ab.py: --diff {x} {y}: no such setting (have: {', '.join(sorted(mean))})")
        cells = []
        for b in batches:
            if b in mean[x] and b in mean[y]:
                us = 1e3 * (mean[x][b] - mean[y][b])
                cells.append("%17s" % (f"{us:+.0f} us" + (f" {us / a.layers:+.1f}/L" if a.layers else "")))
            else:
                cells.append("%17s" % "-")
        print("%-31s " % f"{x} - {y}" + " ".join(cells))


if __name__ == "__main__":
    main()
