#!/usr/bin/env python3
"""Re-prices a profile's held-back attention points (extra.attention.held_back) offline: with the
planner's rule (planner/cost/attention_grid.cpp: log(time / work) linear in log context along a row,
then in log batch or q_len between rows) and, for decode, with partner rows restricted to the same
launch class (cluster, waves, wave filled > 95 %). The class needs the decode kernel's launch plan:
replicated here from profiler/kernels/decode_attention.cu (decode_plan, head_dim 128, group <= 8,
132 SMs) for this study only. docs/attention.md, "What the 3 % target still misses".
  scripts/attention_holdout_study.py profile.json[.gz] ..."""
import collections, gzip, json, math, sys

SMS = 132


def launch(b, kv, ctx):
    per = max(1, b * kv)
    t = min(max(1, 4 * SMS // per), max(1, (ctx + 63) // 64))
    s, cl = t, False
    if 16 <= per <= 64 and 1 < t <= 16:
        hi, s = max(1, (ctx + 63) // 64), 1
        while s < 8 and 2 * s <= t:
            s *= 2
        if s < 8 and t * t > 2 * s * s and 2 * s <= hi:
            s *= 2
        s, cl = (t, False) if per * s * 4 > 3 * SMS * 4 else (s, s > 1)
    waves = (b * kv * s + 4 * SMS - 1) // (4 * SMS)
    return cl, waves, b * kv * s / (4 * SMS * waves) > 0.95


def work(p):
    q = max(p["q_len"], 1)
    return p["batch"] * q * (max(p["context"], q) - (q - 1) / 2)


def along(row, c):
    if c <= row[0][0]:
        return row[0][1]
    if c >= row[-1][0]:
        return row[-1][1]
    for (c0, v0), (c1, v1) in zip(row, row[1:]):
        if c0 <= c <= c1:
            return v0 + (math.log(c) - math.log(c0)) / (math.log(c1) - math.log(c0)) * (v1 - v0)


def price(table, h, classes):
    pre = h["phase"] == "prefill"
    rows = collections.defaultdict(list)
    for a in table:
        if (a["phase"], a["heads"], a["kv_heads"]) != (h["phase"], h["heads"], h["kv_heads"]):
            continue
        if pre and a["batch"] != h["batch"]:
            continue
        rows[a["q_len"] if pre else a["batch"]].append((a["context"], math.log(a["median_us"] / work(a))))
    for r in rows.values():
        r.sort()
    x, c, xs = (h["q_len"] if pre else h["batch"]), h["context"], sorted(rows)
    lo, hi = [r for r in xs if r <= x], [r for r in xs if r >= x]
    if classes and not pre:
        want = launch(x, h["kv_heads"], c)
        same = [r for r in xs if launch(r, h["kv_heads"], c) == want]
        if any(r <= x for r in same) and any(r >= x for r in same):
            lo, hi = [r for r in same if r <= x], [r for r in same if r >= x]
    if not hi or not lo:
        le = along(rows[(hi or lo)[0] if hi else lo[-1]], c)
    elif lo[-1] == hi[0]:
        le = along(rows[x], c)
    else:
        a, b = lo[-1], hi[0]
        va, vb = along(rows[a], c), along(rows[b], c)
        le = va + (math.log(x) - math.log(a)) / (math.log(b) - math.log(a)) * (vb - va)
    return math.exp(le) * work(h)


def main():
    for path in sys.argv[1:]:
        d = json.load(gzip.open(path, "rt") if path.endswith(".gz") else open(path))
        m = d["measurements"]
        held_keys = {(h["phase"], h["heads"], h["kv_heads"], h["batch"], h["q_len"], h["context"])
                     for h in m["extra"]["attention"]["held_back"]}
        table, held = [], []
        for a in m["attention"]:
            if a.get("head_dim") != 128 or a.get("kv_dtype", "bf16") != "bf16":
                continue
            key = (a["phase"], a["heads"], a["kv_heads"], a["batch"], a["q_len"], a["context"])
            (held if key in held_keys else table).append(a)
        for classes in (False, True):
            errs = sorted(((price(table, h, classes) / h["median_us"] - 1, h) for h in held), key=lambda e: -abs(e[0]))
            for phase in ("decode", "prefill"):
                e = [(v, h) for v, h in errs if h["phase"] == phase]
                worst = ", ".join(f"{100 * v:+.1f} % at {h['heads']}/{h['kv_heads']} "
                                  f"{'b' + str(h['batch']) if phase == 'decode' else 'q' + str(h['q_len'])} c{h['context']}"
                                  for v, h in e[:3])
                print(f"{path}: {'same-class rows' if classes else 'planner rule   '} {phase:8s} {len(e)} held back, "
                      f"{sum(abs(v) > 0.03 for v, _ in e)} over 3 %; worst {worst}")


if __name__ == "__main__":
    main()
