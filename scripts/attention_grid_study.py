#!/usr/bin/env python3
"""How finely must the attention grid be measured? Reads a profile timed with
PEERPLAN_ATTENTION_GRID=study (quarter-octave contexts and q_lens, every decode batch to 16 then
multiples of 8) and prices each point left out of a coarser grid (every 2nd or 4th context: half-
octave or octave steps) by the planner's rule (planner/cost/attention_grid.hpp: log(time / work)
linear in log context along a row), printing the worst and 95th-percentile errors.
  scripts/attention_grid_study.py study.json[.gz]"""
import collections, gzip, json, math, sys


def load(path):
    f = gzip.open(path, "rt") if path.endswith(".gz") else open(path)
    rows = {"decode": collections.defaultdict(dict), "prefill": collections.defaultdict(dict)}
    for a in json.load(f)["measurements"]["attention"]:
        x = a["batch"] if a["phase"] == "decode" else a["q_len"]
        rows[a["phase"]][x][a["context"]] = a["median_us"]
    return rows


def work(batch, q, c):
    return batch * q * (c - (q - 1) / 2)


def price(row, c, batch, q):
    cs = sorted(row)
    c0 = max([k for k in cs if k <= c], default=cs[0])
    c1 = min([k for k in cs if k >= c], default=cs[-1])
    e0, e1 = (math.log(row[k] / work(batch, q, k)) for k in (c0, c1))
    f = 0 if c1 == c0 else (math.log(c) - math.log(c0)) / (math.log(c1) - math.log(c0))
    return math.exp(e0 + (e1 - e0) * f) * work(batch, q, c)


def main():
    rows = load(sys.argv[1])
    contexts = sorted({c for r in rows["decode"].values() for c in r})
    for step, name in ((2, "half-octave"), (4, "octave")):
        grid = set(contexts[::step]) | {contexts[-1]}
        for phase in ("decode", "prefill"):
            errs = []
            for x, row in rows[phase].items():
                batch, q = (x, 1) if phase == "decode" else (1, x)
                kept = {c: t for c, t in row.items() if c in grid or c == q}
                for c, t in row.items():
                    if c in kept or c < min(kept) or c > max(kept):
                        continue
                    errs.append((abs(price(kept, c, batch, q) / t - 1), x, c))
            errs.sort(reverse=True)
            worst = ", ".join(f"{100 * e:.1f} % at {x} x {c}" for e, x, c in errs[:3])
            print(f"{name:12s} {phase:8s} {len(errs):4d} points left out: p95 {100 * errs[len(errs) // 20][0]:.1f} %, "
                  f"worst {worst}")


if __name__ == "__main__":
    main()
