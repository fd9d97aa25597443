#!/usr/bin/env python3
"""Offline study (issue 18, session 16): would tile rows past 16 tiles (q 2049-8192) take the held-back prefill
points there within 3 %? (docs/attention.md "Rows past 16 tiles"). Same rule and model as
scripts/attention_tile_rows_study.py (the pricer's wave model over 132 SMs, rows that reach the context).

  1. The held-back points at q_len >= 2048 of every recorded profile of the current grid, priced from their own
     profile's rows: the back-to-back profiles (sessions 12-13) and the paced ones (session 16 S2, S4).
  2. The fine study past the tile rows (session 16 S4: q = 128 t + 1, + 64, + 128 for 17-64 tiles, contexts 8192,
     16384 and the whole prompt) read as a profile of a grid variant: the default grid's rows from 2048 (quarter-
     octave rows snapped to the nearest fine q_len of their tile count, the wave rows) plus tile rows (128 t, 128 t + 1)
     to 16 tiles (today), 24, 32, 48, 64, or every 2nd / 4th boundary to 64; every other fine point at q 2049-8192
     priced from them. `mid`: only the tiles' middles (128 t + 64, a row in no variant: where the held-back q_lens
     2233, 3756, 6317 sit in their tiles), the same points for every variant. The data was timed back to back
     (SM clock 1575-1980 MHz), so each variant also with every time scaled to 1980 MHz (x sm_mhz / 1980), and on
     `steady`: the middles whose tile's three points (start, middle, end at that context) ran at one SM clock.
  3. The cost: rows and points each variant adds to the default grid per head configuration, priced from a profile.

  scripts/attention_tile_rows_long_study.py"""
import gzip, json, os, sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import attention_tile_rows_study as T  # noqa: E402
import attention_wave_model_study as W  # noqa: E402

RUNS = W.RUNS
LONG = f"{RUNS}/2026-12-05-session16/S4/fine-prefill-long.json.gz"
PACED = ["2026-12-05-session16/S2/profile.json.gz", "2026-12-05-session16/S4/profile.json.gz"]
BOOST = 1980.0
VARIANTS = [("tile rows to 16 (today)", 16, 1), ("to 24", 24, 1), ("to 32", 32, 1), ("to 48", 48, 1),
            ("to 64", 64, 1), ("every 2nd to 64", 64, 2), ("every 4th to 64", 64, 4)]


def tile_rows(to, every):
    """Today's rows to 16 tiles, then both sides of every `every`-th boundary to `to` tiles."""
    return [x for t in range(1, to + 1) if t <= 16 or t % every == 0 for x in (t * 128, t * 128 + 1)]


def load_long(clock):
    """{(heads, kv_heads, head_dim): {(q, c): seconds}}, and {(heads, q, c): sm_mhz}."""
    d = json.load(gzip.open(LONG, "rt"))
    cfg, mhz = {}, {}
    for a in d["measurements"]["attention"]:
        if a["phase"] != "prefill" or a["batch"] != 1:
            continue
        k = (a["heads"], a["kv_heads"], a["head_dim"])
        cfg.setdefault(k, {})[(a["q_len"], a["context"])] = a["median_us"] * 1e-6 * (a["sm_mhz"] / BOOST if clock else 1)
        mhz[(a["heads"], a["q_len"], a["context"])] = a["sm_mhz"]
    return cfg, mhz


def steady(heads, q, c, mhz):
    """The tile's start, middle (q) and end at context c (the whole prompt: each its own) ran at one clock."""
    lo, hi = q - 63, q + 64
    return len({mhz.get((heads, x, x if c == q else c)) for x in (lo, q, hi)}) == 1


def grid_rows(heads, avail, to, every):
    quarter = W.log_steps(16, 8192, 4, lambda i, x: i % 2 == 0 or x >= 128)
    rows = {W.snap(q, avail) for q in quarter if q >= 2048}
    rows |= {q if q in avail else W.snap(q, avail) for q in W.wave_rows(heads) + tile_rows(to, every) if q >= 2048}
    return rows


def study_held():
    print("1. Held-back prefill points at q_len >= 2048, each profile's own rows (wave model; worst / p90 / over 3 %)")
    for label, files in (("back to back, sessions 12-13", T.CURRENT), ("paced, session 16 S2 + S4", PACED)):
        e, cfgs = [], 0
        for f, k, g, t in T.held_sets(files):
            cfgs += 1
            e += [v for v, q, _ in W.errors(g, t, T.model(k[0]), reach=True) if q >= 2048]
        print(f"  {label:30s} {cfgs:2d} configurations: {T.stats(e)}")


def study_long():
    print("2. Fine data past 16 tiles read as a profile of each grid (worst / p90 / over 3 %; raw | at 1980 MHz)")
    data, mhz = {}, {}
    for clock in (False, True):
        data[clock], mhz = load_long(clock)
    for k in sorted(data[False]):
        avail = sorted({q for q, _ in data[False][k]})
        print(f"  {k[0]}/{k[1]} d{k[2]}")
        for name, to, every in VARIANTS:
            rows = grid_rows(k[0], avail, to, every)
            cols, st = [], ""
            for clock in (False, True):
                pts = data[clock][k]
                grid = {p: t for p, t in pts.items() if p[0] in rows}
                rest = {p: t for p, t in pts.items() if p not in grid and p[0] > 2048}
                mid = {p: t for p, t in rest.items() if p[0] % 128 == 64}
                norm = T.model(k[0])
                cols.append((T.stats([v for v, _, _ in W.errors(grid, rest, norm, reach=True)]),
                             T.stats([v for v, _, _ in W.errors(grid, mid, norm, reach=True)])))
                if not clock:
                    calm = {p: t for p, t in mid.items() if steady(k[0], p[0], p[1], mhz)}
                    st = T.stats([v for v, _, _ in W.errors(grid, calm, norm, reach=True)])
            (a, m), (ac, mc) = cols
            print(f"    {name:24s} {len(rows):3d} rows  all {a:>20s} | {ac:>20s}   mid {m:>20s} | {mc:>20s}   steady {st:>20s}")


def study_cost():
    print("3. Cost: rows, points and s of profiling each variant adds (x 13 samples, priced from a paced profile)")
    sources = [("2026-12-05-session16/S2/profile.json.gz", None), ("2026-12-05-session16/S4/profile.json.gz", None),
               ("2026-12-04-session12/C/profile.json.gz", 64)]
    for f, only in sources:
        d = json.load(gzip.open(f"{RUNS}/{f}", "rt"))
        m = d["measurements"]["attention"]
        cfg, _, _, _ = W.load(f"{RUNS}/{f}")
        for k in sorted(cfg):
            if only and k[0] != only:
                continue
            g = cfg[k]
            rows, ctx = {q for q, _ in g}, sorted({c for _, c in g})
            same = [a for a in m if (a["heads"], a["kv_heads"], a["head_dim"]) == k[:3]]
            n_all, s_all = len(same), 13e-6 * sum(a["median_us"] for a in same)
            n_pre = sum(a["phase"] == "prefill" for a in same)
            parts = []
            for name, to, every in VARIANTS[1:]:
                new = [q for q in tile_rows(to, every) if q > 2049 and q not in rows]  # past today's
                pts = [(q, c) for q in new for c in [q] + [c for c in ctx if c > q]]
                s = 13 * sum(W.price(g, q, c, T.model(k[0]), reach=True) for q, c in pts)
                parts.append(f"{name} +{len(new)} rows +{len(pts)} pts +{s:.1f} s ({100 * s / s_all:+.0f} %)")
            print(f"  {f} {k[0]}/{k[1]} d{k[2]}: {n_pre} prefill of {n_all} points, {s_all:.1f} s;")
            print("    " + "; ".join(parts))


def main():
    study_held()
    study_long()
    study_cost()


if __name__ == "__main__":
    main()
