#!/usr/bin/env python3
"""Offline study (session 12, 2026-12-04): prefill attention priced with q_len and context placed on the
interpolation axes by their 128-token tile counts (cuDNN's tiles) and the tiles' work, against the planner's
rule (planner/cost/attention_grid.cpp: log(time / work) linear in log context, then in log q_len), on the
held-back points of GPU profiles (measurements.extra.attention.held_back). Prints, per profile and rule, the
held-back prefill points over 3 %, the p95 and the worst. Not the pricer: a study (docs/attention.md, "The grid
on the GPU"); the rule tried in C++ halved the points over 3 % but moved session 8 D's Llama-3.1-8B Azure TTFT
p50 from +5.3 to +7.5 % (recorded met at +3.4), so it is not in the pricer.
  scripts/attention_tile_axis_study.py profile.json[.gz] ..."""
import collections, gzip, json, math, sys

TILE = 128


def work(p, tiles):
    q, c = max(p["q_len"], 1), max(p["context"], p["q_len"])
    if tiles:
        q = math.ceil(q / TILE) * TILE
        c = max(math.ceil(c / TILE) * TILE, q)
    return p["batch"] * q * (c - (q - 1) / 2)


def axis(v, tiles):
    return math.log(math.ceil(v / TILE) * TILE) + 1e-3 * math.log(v) if tiles else math.log(v)


def key(a):
    return a["phase"], a["heads"], a["kv_heads"], a["head_dim"], a.get("v_dim") or a["head_dim"]


def along(row, u):
    if u <= row[0][0]:
        return row[0][1]
    if u >= row[-1][0]:
        return row[-1][1]
    for (u0, v0), (u1, v1) in zip(row, row[1:]):
        if u0 <= u <= u1:
            return v0 + (u - u0) / (u1 - u0) * (v1 - v0)


def price(table, h, tiles):
    rows = collections.defaultdict(list)
    for a in table:
        if key(a) == key(h) and a["batch"] == h["batch"]:
            rows[a["q_len"]].append((axis(a["context"], tiles), math.log(a["median_us"] / work(a, tiles))))
    for r in rows.values():
        r.sort()
    x, u = h["q_len"], axis(h["context"], tiles)
    xs = sorted(rows)
    lo, hi = [r for r in xs if r <= x], [r for r in xs if r >= x]
    if not lo or not hi:
        le = along(rows[hi[0] if hi else lo[-1]], u)
    elif lo[-1] == hi[0]:
        le = along(rows[x], u)
    else:
        a, b = lo[-1], hi[0]
        va, vb = along(rows[a], u), along(rows[b], u)
        le = va + (axis(x, tiles) - axis(a, tiles)) / (axis(b, tiles) - axis(a, tiles)) * (vb - va)
    return math.exp(le) * work(h, tiles)


def main():
    for path in sys.argv[1:]:
        d = json.load(gzip.open(path, "rt") if path.endswith(".gz") else open(path))
        m = d["measurements"]
        hk = {(h["phase"], h["heads"], h["kv_heads"], h["head_dim"], h["batch"], h["q_len"], h["context"])
              for h in m["extra"]["attention"]["held_back"]}
        table, held = [], []
        for a in m["attention"]:
            if a.get("kv_dtype", "bf16") != "bf16" or a["phase"] != "prefill":
                continue
            k = (a["phase"], a["heads"], a["kv_heads"], a["head_dim"], a["batch"], a["q_len"], a["context"])
            (held if k in hk else table).append(a)
        for tiles in (False, True):
            e = sorted(((price(table, h, tiles) / h["median_us"] - 1, h) for h in held), key=lambda v: -abs(v[0]))
            a = sorted(abs(v) for v, _ in e)
            print(f"{path}: {'tile axes ' if tiles else 'planner   '} {sum(x > 0.03 for x in a)} of {len(a)} over 3 %, "
                  f"p95 {100 * a[int(0.95 * len(a)) - 1]:.1f} %, worst " +
                  ", ".join(f"{100 * v:+.1f} % at {h['heads']}/{h['kv_heads']} d{h['head_dim']} q{h['q_len']} c{h['context']}"
                            for v, h in e[:3]))


if __name__ == "__main__":
    main()
