#!/usr/bin/env python3
"""Offline study (issue 18, session 13): what takes prefill attention's interpolation error to 3 %, a better
wave model or more rows (docs/attention.md "Rows at every tile boundary"). Uses the rule and the model of
scripts/attention_wave_model_study.py (= planner/cost/attention_grid.cpp, prefill priced with the SM count).

  1. The model: variants of prefill_wave_model against every recorded profile's held-back prefill points
     (cuDNN profiles; each priced from its own profile's rows): the makespan as today; a partial last wave
     cheaper than a full one (the makespan blended with the fluid total / SMs by beta, fixed or fitted per
     table from its own wave-row pairs t x 128 | t x 128 + 1); CTAs of the cuDNN graph's power-of-two
     query bucket (profiler/gpu/cudnn_attention.cpp bucket_q) in tile- or head-major order.
  2. The rows: the fine study (q_len every 8 tokens to 1024, every 32 to 2048) read as a profile whose rows
     are the default grid's (each row snapped to the nearest fine q_len of the same tile count; t x 128 + 1
     to t x 128 + 8 where the fine data lacks it), with and without the tile rows (attention_tile_rows: both
     sides of every tile boundary to 16 tiles); every other fine point priced from those rows, by the wave
     model and by the attended pairs. Context 1579 is left out of the main figure (the fine data has no grid
     context between 1024 and 4096, the default grid five) and shown apart.
  3. The cost: the added rows' profiling time per recorded profile and head configuration (each new point
     priced from the profile, x (10 samples + 2 warm-up + 1)).

  scripts/attention_tile_rows_study.py [--model] [--rows] [--cost]     (all three without a flag)"""
import collections, functools, heapq, math, os, statistics, sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import attention_wave_model_study as W  # noqa: E402

RUNS = W.RUNS
FINE = f"{RUNS}/2026-12-04-session13/S1/fine-prefill.json.gz"
# Profiles of the current default grid (69 held-back prefill points per head configuration) ...
CURRENT = ["2026-12-04-session12/C/profile.json.gz", "2026-12-04-session12/C/grid-moe.json.gz",
           "2026-12-04-session12/D/profile.json.gz", "2026-12-04-session13/S1/profile.json.gz",
           "2026-12-04-session13/S4/profile.json.gz", "2026-12-04-session13/X1/profile.json.gz"]
# ... and the earlier cuDNN profiles (fewer rows; 8-30 held-back points per configuration).
EARLIER = ["2026-12-04-session8/D/profile.json.gz", "2026-12-04-session8/E/profile.json.gz",
           "2026-12-04-session10/A/profile.json.gz", "2026-12-04-session10/B/profile.json.gz",
           "2026-12-04-session10/E/profile.json.gz", "2026-12-04-session10/X/profile.json.gz",
           "2026-12-04-session11/A/profile.json.gz", "2026-12-04-session11/B/profile.json.gz",
           "2026-12-04-session11/C/profile.json.gz", "2026-12-04-session11/D/profile.json.gz",
           "2026-12-04-session11/Y/profile.json.gz", "2026-12-04-session12/A/profile.json.gz",
           "2026-12-04-session12/B/profile.json.gz"]
TILE_ROWS_TO = W.TILE_ROWS_TO


def bucket(q):
    b = 64
    while b < q:
        b *= 2
    return b


@functools.lru_cache(maxsize=None)
def makespan(q, c, heads, order="head", pad=False, sms=W.SMS):
    blocks = W.cta_blocks(q, c, 128)
    if pad:  # the graph's bucket of query rows: tiles past the sequence exit at once
        blocks = blocks + [0] * (bucket(q) // 128 - len(blocks))
    works = [b for _ in range(heads) for b in blocks] if order == "head" else [b for b in blocks for _ in range(heads)]
    if len(works) <= sms:
        return max(works)
    h = [0] * sms
    for w in works:
        heapq.heapreplace(h, h[0] + w)
    return max(h)


def fluid(q, c, heads, sms=W.SMS):
    b = W.cta_blocks(q, c, 128)
    return max(sum(b) * heads / sms, max(b))


def model(heads, beta=0.0, order="head", pad=False, fixed=8.0):
    return lambda q, c: (1 - beta) * makespan(q, c, heads, order, pad) + beta * fluid(q, c, heads) + fixed


def fitted_beta(grid, heads):
    """beta from the table's own wave-row pairs (q0 = t x 128, q0 + 1, both rows): at each context both
    reach, the beta for which the model's ratio is the measured one; the median, within [0, 1]."""
    bs = []
    for (q0, c), t0 in grid.items():
        q1 = q0 + 1
        if q0 % 128 or (q1, c) not in grid or c <= q1:
            continue
        r = grid[(q1, c)] / t0
        m0, m1 = makespan(q0, c, heads) + 8, makespan(q1, c, heads) + 8
        f0, f1 = fluid(q0, c, heads) + 8, fluid(q1, c, heads) + 8
        den = r * (f0 - m0) - (f1 - m1)
        if abs(den) > 1e-9:
            bs.append((m1 - r * m0) / den)
    return min(1.0, max(0.0, statistics.median(bs))) if bs else 0.0


def stats(e):
    a = sorted(abs(v) for v in e)
    if not a:
        return "-"
    p90 = a[min(len(a) - 1, int(math.ceil(0.9 * len(a))) - 1)]
    return f"{100 * a[-1]:4.1f} / {100 * p90:3.1f} / {sum(x > 0.03 for x in a):3d} of {len(a)}"


def held_sets(files):
    for f in files:
        cfg, held, is_profile, sms = W.load(f"{RUNS}/{f}")
        assert is_profile and sms == W.SMS, f
        for k in sorted(cfg):
            if held.get(k):
                yield f, k, cfg[k], held[k]


def study_model():
    print("1. The model, against the recorded held-back prefill points (worst / p90 / over 3 %, in %)")
    variants = [("wave model (the pricer)", {}), ("partial wave, beta 0.2", {"beta": 0.2}),
                ("partial wave, beta 0.4", {"beta": 0.4}), ("partial wave, beta fitted", {"beta": "fit"}),
                ("query bucket, head-major", {"pad": True}), ("query bucket, tile-major", {"pad": True, "order": "tile"})]
    for name, files in (("current grid", CURRENT), ("earlier grids", EARLIER)):
        sets = list(held_sets(files))
        print(f"  {name}: {len(sets)} head configurations, {sum(len(s[3]) for s in sets)} points")
        print(f"    {'attended pairs':28s} {stats([v for f, k, g, t in sets for v, _, _ in W.errors(g, t, W.work_pairs)])}")
        for label, kw in variants:
            e, betas = [], []
            for f, k, g, t in sets:
                kk = dict(kw)
                if kk.get("beta") == "fit":
                    kk["beta"] = fitted_beta(g, k[0])
                    betas.append(kk["beta"])
                e += [v for v, _, _ in W.errors(g, t, model(k[0], **kk), reach=True)]
            extra = f"   (fitted beta {min(betas):.2f}-{max(betas):.2f})" if betas else ""
            print(f"    {label:28s} {stats(e)}{extra}")


def study_rows():
    cfg, _, _, _ = W.load(FINE)
    print("2. The rows: fine study points priced from the default grid's rows (worst / p90 / over 3 %, in %)")
    print(f"  {'heads':14s} {'rule':6s} {'rows before':>14s} {'before':>24s} {'rows after':>11s} {'after: tile rows to 16':>24s}"
          f"   {'context 1579: before':>24s} {'after':>24s}")
    grid_c = {512, 609, 724, 1024, 4096, 16384}
    for k in sorted(cfg):
        pts = cfg[k]
        avail = sorted({q for q, _ in pts})
        for rule in ("wave", "pairs"):
            norm = model(k[0]) if rule == "wave" else W.work_pairs
            cols = []
            for tiles in (0, TILE_ROWS_TO):
                rows = W.fine_rows(k[0], avail, tiles)
                grid = {p: t for p, t in pts.items() if p[0] in rows and (p[1] in grid_c or p[1] == p[0])}
                rest = {p: t for p, t in pts.items() if p not in grid and 16 <= p[0] <= 2048}
                main = {p: t for p, t in rest.items() if p[1] != 1579}
                c1579 = {p: t for p, t in rest.items() if p[1] == 1579}
                e = [v for v, _, _ in W.errors(grid, main, norm, reach=rule == "wave")]
                e2 = [v for v, _, _ in W.errors(grid, c1579, norm, reach=rule == "wave")]
                cols.append((len(rows), stats(e), stats(e2)))
            (nb, sb, cb), (na, sa, ca) = cols
            label = f"{k[0]}/{k[1]} d{k[2]}" + (f" v{k[3]}" if k[3] != k[2] else "")
            print(f"  {label:14s} {rule:6s} {nb:14d} {sb:>24s} {na:11d} {sa:>24s}   {cb:>24s} {ca:>24s}")


def study_cost():
    print("3. The cost of the tile rows (s of profiling per head configuration, priced from each profile)")
    for f in ["2026-12-04-session12/D/profile.json.gz", "2026-12-04-session12/C/profile.json.gz",
              "2026-12-04-session12/C/grid-moe.json.gz", "2026-12-04-session13/X1/profile.json.gz"]:
        cfg, held, _, _ = W.load(f"{RUNS}/{f}")
        parts, total = [], 0.0
        for k in sorted(cfg):
            g = cfg[k]
            norm = model(k[0])
            rows = {q for q, _ in g}
            ctx = sorted({c for _, c in g})
            new = [q for q in W.tile_rows(TILE_ROWS_TO) if q not in rows]
            s = 13 * sum(W.price(g, q, c, norm, reach=True) for q in new for c in [q] + [c for c in ctx if c > q])
            total += s
            parts.append(f"{k[0]}/{k[1]} d{k[2]} +{len(new)} rows +{s:.1f} s (of {13 * sum(g.values()):.1f})")
        print(f"  {f}: +{total:.1f} s: " + "; ".join(parts))


def main():
    flags = [a for a in sys.argv[1:] if a.startswith("--")]
    if not flags or "--model" in flags:
        study_model()
    if not flags or "--rows" in flags:
        study_rows()
    if not flags or "--cost" in flags:
        study_cost()


if __name__ == "__main__":
    main()
