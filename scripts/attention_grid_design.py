#!/usr/bin/env python3
"""The default attention grid (planner/cost/attention_grid.cpp attention_grid_plan), checked on the
study grid (PEERPLAN_ATTENTION_GRID=study; quarter-octave q_lens and contexts, every decode batch to 16
then multiples of 8). For each head configuration and phase, every study point that is not a point of
the proposed grid is priced from the grid's points by the planner's rule (a re-implementation of
planner/cost/attention_grid.cpp: log(time / work) linear in log context along a row, linear in log
q_len or log batch between rows; prefill rows read at the chunk's context / q_len where the upper row
does not reach down to the context) and the worst and p95 error printed, for the grid before
(half-octave steps) and the proposed one, with point counts and the estimated profiling time (median x
(samples + warmup + 1) per point; held-back points included, those outside the study priced from it).
Also the lease-to-lease repeatability of the same shapes (session 11 A/C/D, session 10 E).
The session-12 design study: the live grid has since gained prefill rows on both sides of every
128-token tile boundary to 16 tiles (session 14), which this script does not model; see
scripts/attention_tile_rows_study.py for the grid as it is.
  scripts/attention_grid_design.py [study.json.gz] [profiles...]"""
import bisect, collections, gzip, json, math, os, sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
RUNS = os.path.join(ROOT, "docs/validation/runs")
STUDY = os.path.join(RUNS, "2026-12-04-session12/A/study.json.gz")
REPEATS = [os.path.join(RUNS, p) for p in ("2026-12-04-session11/A/profile.json.gz", "2026-12-04-session11/C/profile.json.gz",
                                            "2026-12-04-session11/D/profile.json.gz", "2026-12-04-session10/E/profile.json.gz")]
SMS, MAX_TOKENS, SAMPLES, WARMUP = 132, 1 << 21, 10, 2


def work(b, q, c):
    q = max(q, 1)
    c = max(c, q)
    return b * q * (c - (q - 1) / 2)


def load(path):
    m = json.load(gzip.open(path, "rt") if path.endswith(".gz") else open(path))["measurements"]
    cfg = collections.defaultdict(dict)  # (phase, heads, kv_heads, head_dim) -> {(batch or q_len, context): us}
    for a in m["attention"]:
        if a.get("kv_dtype", "bf16") != "bf16":
            continue
        x = a["batch"] if a["phase"] == "decode" else a["q_len"]
        cfg[(a["phase"], a["heads"], a["kv_heads"], a["head_dim"])][(x, a["context"])] = a["median_us"]
    regime = m["extra"]["attention"]["grid"].get("decode_regime_rows", {})
    return cfg, regime


def along(row, c):
    if c <= row[0][0]:
        return row[0][1]
    if c >= row[-1][0]:
        return row[-1][1]
    i = bisect.bisect_left(row, (c, -1e300))
    (c0, v0), (c1, v1) = row[i - 1], row[i]
    return v0 + (math.log(c) - math.log(c0)) / (math.log(c1) - math.log(c0)) * (v1 - v0)


class Pricer:
    """planner/cost/attention_grid.cpp's price(); skew=False: the rule before (the upper row's edge)."""

    def __init__(self, pts, prefill, skew=True):
        self.prefill, self.skew = prefill, skew
        rows = collections.defaultdict(list)
        for (x, c), t in pts.items():
            b, q = (1, x) if prefill else (x, 1)
            rows[x].append((c, math.log(t / work(b, q, c))))
        self.rows = {x: sorted(r) for x, r in rows.items()}
        self.xs = sorted(self.rows)

    def __call__(self, x, c):
        b, q = (1, x) if self.prefill else (x, 1)
        xs, i = self.xs, bisect.bisect_left(self.xs, x)
        if i < len(xs) and xs[i] == x:
            le = along(self.rows[x], c)
        elif i == 0 or i == len(xs):
            le = along(self.rows[xs[min(i, len(xs) - 1)]], c)
        else:
            lo, hi = xs[i - 1], xs[i]
            skew = self.skew and self.prefill and c < self.rows[hi][0][0] and c >= x
            a = along(self.rows[lo], c * lo / x if skew else c)
            v = along(self.rows[hi], c * hi / x if skew else c)
            le = a + (math.log(x) - math.log(lo)) / (math.log(hi) - math.log(lo)) * (v - a)
        return math.exp(le) * work(b, q, c)


def steps(lo, hi, per_octave, keep=lambda i, x: True):
    v, i = [], 0
    while True:
        x = int(math.floor(lo * 2 ** (i / per_octave) + 0.5))
        if x >= hi:
            break
        if keep(i, x):
            v.append(x)
        i += 1
    return v + [hi]


def geo_mid(a, b):
    return int(math.floor(math.sqrt(a * b) + 0.5))


def wave_rows(heads, max_q=8192, tile=128):
    v, t = [], 1
    waves = lambda t: (t * heads + SMS - 1) // SMS
    while t * tile < max_q and len(v) < 16:
        if waves(t + 1) > waves(t):
            v += [t * tile, t * tile + 1]
        t += 1
    return v


def mla_span(b, heads, c):  # planner/cost/attention_grid.cpp mla_decode_launch_span (16-head tiles)
    splits = max(1, min(max(1, 2 * SMS // max(1, b * ((heads + 15) // 16))), (c + 127) // 128))
    rows = (-(-c // splits) + 31) // 32 * 32
    return rows, int(splits > 1)


def step_rows(batches, contexts, span):
    rows = set()
    for c in contexts:
        prev = span(1, c)
        for b in range(1, batches[-1]):
            if (b + 1) * c > MAX_TOKENS:
                break
            nxt = span(b + 1, c)
            if nxt[0] > 1.10 * prev[0] or nxt[1] != prev[1]:
                rows |= {b, b + 1}
            prev = nxt
    return sorted(r for r in rows if r not in batches)


def plan(proposed, max_context=131072):
    """(batches, contexts, q_lens, held_prefill, held_decode, held decode batches) as attention_grid_plan."""
    if proposed:
        B = list(range(1, 17)) + list(range(24, 257, 8))
        Q = steps(16, 8192, 4, lambda i, x: i % 2 == 0 or x >= 128)
        C = steps(256, max_context, 4, lambda i, x: i % 2 == 0 or x <= 4096)
        held_b = (20, 44, 100)
    else:
        B = [1, 2, 3, 4, 6, 8, 12, 16] + list(range(24, 257, 8))
        Q, C = steps(16, 8192, 2), steps(256, max_context, 2)
        held_b = (5, 20, 100)
    hp = [(geo_mid(Q[i], Q[i + 1]), geo_mid(C[j], C[j + 1])) for i in range(1, len(Q) - 1, 3)
          for j in range(1, len(C) - 1, 3) if geo_mid(C[j], C[j + 1]) >= geo_mid(Q[i], Q[i + 1])]
    hd = [(b, geo_mid(C[j], C[j + 1])) for b in held_b for j in range(1, len(C) - 1, 3)
          if b * geo_mid(C[j], C[j + 1]) <= MAX_TOKENS]
    return B, C, Q, hp, hd


def grid_of(key, proposed, regime):
    phase, heads, kv, hd = key
    B, C, Q, hp, hdec = plan(proposed)
    if phase == "decode":
        if hd == 576:  # MLA decode: rows at mla_decode's split-count steps (none before)
            extra = step_rows(B, C, lambda b, c: mla_span(b, heads, c)) if proposed else []
        else:  # decode_attention's launch steps: as the profiles recorded them (needs the CUDA kernel's plan)
            extra = [b for b in regime.get(f"heads {heads} kv {kv} dim {hd}", []) if b not in B]
        rows = sorted(set(B + extra))
        pts = {(b, c) for b in rows for c in C if b * c <= MAX_TOKENS}
        free = lambda b: next(x for d in range(64) for x in (b + d, b - d) if x > 0 and x not in rows)
        held = {(free(b), c) for b, c in hdec}
    else:
        rows = sorted(set(Q + wave_rows(heads)))
        pts = {(q, q) for q in rows} | {(q, c) for q in rows for c in C if c > q}
        free = lambda q: next(x for d in range(64) for x in (q + d, q - d) if x > 0 and x not in rows)
        held = {(free(q), c) for q, c in hp if c >= free(q)}
    return rows, pts, held


def stats(errs):
    a = sorted(abs(e) for e, _ in errs)
    if not a:
        return dict(n=0, worst=0, at=None, p95=0, over=0)
    w = max(errs, key=lambda v: abs(v[0]))
    return dict(n=len(a), worst=w[0], at=w[1], p95=a[int(0.95 * (len(a) - 1))], over=sum(x > 0.03 for x in a))


def main():
    args = sys.argv[1:]
    study, _ = load(args[0] if args else STUDY)
    _, regime = load(REPEATS[0])  # decode_attention's launch-step rows of the default grid (session 11 A)
    tot = {False: [0, 0.0], True: [0, 0.0]}
    print("config                          grid      points  time_s  | study points off the grid: n  worst (at)             p95   >3%")
    for key in sorted(study):
        st = study[key]
        full = Pricer(st, key[0] == "prefill")
        for proposed in (False, True):
            rows, pts, held = grid_of(key, proposed, regime)
            g = {p: st[p] for p in pts if p in st}
            P = Pricer(g, key[0] == "prefill", skew=proposed)
            s = stats([(P(*p) / t - 1, p) for p, t in st.items() if p not in g])
            secs = sum((st.get(p) or full(*p)) for p in pts | held) * (SAMPLES + WARMUP + 1) * 1e-6
            tot[proposed][0] += len(pts | held)
            tot[proposed][1] += secs
            name = f"{key[0]} {key[1]}/{key[2]} d{key[3]}"
            print(f"{name:30s}  {'proposed' if proposed else 'before':8s} {len(pts):5d}+{len(held):3d} {secs:6.1f}  |"
                  f" {s['n']:4d}  {100 * s['worst']:+6.1f} % {str(s['at']):15s} {100 * s['p95']:5.1f} % {s['over']:4d}")
    b, p = tot[False], tot[True]
    print(f"all: before {b[0]} points {b[1]:.1f} s, proposed {p[0]} points {p[1]:.1f} s "
          f"({100 * (p[0] / b[0] - 1):+.0f} % points, {100 * (p[1] / b[1] - 1):+.0f} % time)")
    # Repeatability: the same shape timed in two leases (different GPUs), relative difference.
    runs = [load(r)[0] for r in REPEATS if os.path.exists(r)]
    print("lease-to-lease repeatability (session 11 A/C/D, 10 E; same shapes): |difference| p50 / p95 / worst")
    for key in sorted(study):
        d = []
        for i in range(len(runs)):
            for j in range(i + 1, len(runs)):
                X, Y = runs[i].get(key, {}), runs[j].get(key, {})
                d += [abs(X[p] / Y[p] - 1) for p in X if p in Y]
        if d:
            d.sort()
            print(f"  {key[0]} {key[1]}/{key[2]} d{key[3]}: {len(d)} pairs, {100 * d[len(d) // 2]:.1f} / "
                  f"{100 * d[int(0.95 * (len(d) - 1))]:.1f} / {100 * d[-1]:.1f} %")


if __name__ == "__main__":
    main()
