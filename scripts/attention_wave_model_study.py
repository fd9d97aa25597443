#!/usr/bin/env python3
"""Offline study (issue 18, session 13): a wave model of cuDNN's fused prefill attention used to interpolate
the measured grid, against the planner's rule (planner/cost/attention_grid.cpp).

The model: a CTA per (sequence, head, 128-row query tile); tile i of a chunk of q new tokens over a context
of c keys (causal, aligned bottom-right) visits ceil((c - q + min((i + 1) 128, q)) / B) KV blocks of B keys;
the CTAs are dispatched in order to the SMs (list scheduling, `slots` CTAs resident per SM sharing it);
the model's figure is the makespan in KV blocks plus a per-CTA cost. The rule: today's, with the work
(attended pairs) replaced by the model's figure, i.e. log(time / model) interpolated in (log q, log c).
Both rules price each point from the DEFAULT grid's rows only (attention_grid_plan: quarter-octave and tile
rows, + the wave rows); on the fine data each row the data lacks is snapped to the nearest fine q_len of the
same tile count (fine_rows). `--no-tile-rows`: the default grid before its tile rows.

  scripts/attention_wave_model_study.py                       (the session 12/13 files below)
  scripts/attention_wave_model_study.py --variants            (model variants on the fine data)
  scripts/attention_wave_model_study.py fine.json.gz prof.json.gz ...   (a .json.gz whose
        extra.attention.held_back is non-empty is read as a profile, else as fine data)
  scripts/attention_wave_model_study.py --whole-prompts [prof.json.gz ...]   (profiles: each row's whole-
        prompt point (q, q), 100 <= q <= 2100, priced from the other points, held-back ones included as the
        pricer sees them; both rules with every row, and with only the rows that reach the context)"""
import collections, functools, gzip, heapq, json, math, os, sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RUNS = os.path.join(ROOT, "docs/validation/runs")
FILES = [f"{RUNS}/2026-12-04-session13/S1/fine-prefill.json.gz",
         f"{RUNS}/2026-12-04-session12/C/profile.json.gz", f"{RUNS}/2026-12-04-session12/C/grid-moe.json.gz",
         f"{RUNS}/2026-12-04-session12/D/profile.json.gz", f"{RUNS}/2026-12-04-session13/S1/profile.json.gz",
         f"{RUNS}/2026-12-04-session12/A/profile.json.gz", f"{RUNS}/2026-12-04-session12/A/study.json.gz"]
SMS = 132
TILE = 128


# ---- the default grid (planner/cost/attention_grid.cpp attention_grid_plan, attention_wave_rows)
def log_steps(lo, hi, per_octave, keep):
    v, i = [], 0
    while True:
        x = int(math.floor(lo * 2 ** (i / per_octave) + 0.5))
        if x >= hi:
            break
        if keep(i, x):
            v.append(x)
        i += 1
    return v + [hi]


def wave_rows(heads, sms=SMS, max_q=8192):
    v, t = [], 1
    waves = lambda tiles: (tiles * heads + sms - 1) // sms
    while t * TILE < max_q and len(v) < 16:
        if waves(t + 1) > waves(t):
            v += [t * TILE, t * TILE + 1]
        t += 1
    return v


TILE_ROWS_TO = 16  # attention_grid.hpp kTileRowsTo


def tile_rows(tiles=TILE_ROWS_TO):
    """Both sides of every 128-row tile boundary to `tiles` tiles (attention_grid.cpp attention_tile_rows)."""
    return [x for t in range(1, tiles + 1) for x in (t * TILE, t * TILE + 1)]


def default_grid(heads, max_context=131072):
    q = set(log_steps(16, 8192, 4, lambda i, x: i % 2 == 0 or x >= 128)) | set(wave_rows(heads)) | set(tile_rows())
    c = set(log_steps(256, max_context, 4, lambda i, x: i % 2 == 0 or x <= 4096))
    return q, c


# ---- the model
def cta_blocks(q, c, block):
    """KV blocks each query tile of one sequence and head visits (tile 0 first)."""
    c = max(c, q)
    return [-(-(c - q + min((i + 1) * TILE, q)) // block) for i in range(-(-q // TILE))]


@functools.lru_cache(maxsize=None)
def makespan(q, c, heads, batch=1, block=128, order="tile", slots=1, per_cta=0.0, sms=SMS):
    blocks = cta_blocks(q, c, block)
    if order == "tile":            # for tile: for head (tile 0 first)
        works = [b for b in blocks for _ in range(heads)]
    elif order == "tile_rev":      # heaviest tiles first (FA3's causal order)
        works = [b for b in reversed(blocks) for _ in range(heads)]
    elif order == "head":          # for head: for tile
        works = [b for _ in range(heads) for b in blocks]
    elif order == "head_rev":
        works = [b for _ in range(heads) for b in reversed(blocks)]
    works = [w + per_cta for w in works] * batch
    if slots == 1:
        if len(works) <= sms:
            return max(works)
        h = [0.0] * sms
        for w in works:
            heapq.heapreplace(h, h[0] + w)
        return max(h)
    return shared_makespan(works, sms, slots)


def shared_makespan(works, sms, slots):
    """`slots` CTAs per SM share its throughput equally; a freed slot takes the next CTA."""
    it = iter(works)
    active = [[] for _ in range(sms)]
    for k in range(slots):
        for s in range(sms):
            w = next(it, None)
            if w is not None:
                active[s].append(w)
    t_last = [0.0] * sms
    ev = [(min(a) * len(a), s) for s, a in enumerate(active) if a]
    heapq.heapify(ev)
    end = 0.0
    while ev:
        t, s = heapq.heappop(ev)
        a = active[s]
        d = (t - t_last[s]) / len(a)
        a[:] = [r - d for r in a]
        t_last[s] = t
        a[:] = [r for r in a if r > 1e-9]
        while len(a) < slots:
            w = next(it, None)
            if w is None:
                break
            a.append(w)
        end = max(end, t)
        if a:
            heapq.heappush(ev, (t + min(a) * len(a), s))
    return end


def work_pairs(q, c, batch=1):
    c = max(c, q)
    return batch * q * (c - (q - 1) / 2)


# ---- the rule: log(time / norm) linear in log context along each row, then in log q between rows
def along(row, c):
    if c <= row[0][0]:
        return row[0][1]
    if c >= row[-1][0]:
        return row[-1][1]
    for (c0, v0), (c1, v1) in zip(row, row[1:]):
        if c0 <= c <= c1:
            return v0 + (math.log(c) - math.log(c0)) / (math.log(c1) - math.log(c0)) * (v1 - v0)


def price(grid, q, c, norm, reach=False):
    """grid: {(q, c): seconds}; norm(q, c) -> the work or the model figure. reach: only rows that reach c
    (the pricer's rule with the wave model: a row's first context <= c or its whole-prompt point (q, q),
    its last >= c or the grid's largest; a held-back row's edge far above c stands in for nothing)."""
    rows = collections.defaultdict(list)
    for (gq, gc), t in grid.items():
        rows[gq].append((gc, math.log(t / norm(gq, gc))))
    for r in rows.values():
        r.sort()
    if (q, c) in grid:
        return grid[(q, c)]
    xs = sorted(rows)
    if reach:
        c_max = max(r[-1][0] for r in rows.values())
        ok = [x for x in xs if (rows[x][0][0] <= c or rows[x][0][0] == x) and (c <= rows[x][-1][0] or rows[x][-1][0] == c_max)]
        xs = ok or xs
    lo, hi = [r for r in xs if r <= q], [r for r in xs if r >= q]
    if not lo or not hi:
        le = along(rows[hi[0] if hi else lo[-1]], c)
    elif lo[-1] == hi[0]:
        le = along(rows[q], c)
    else:
        a, b = lo[-1], hi[0]
        f = (math.log(q) - math.log(a)) / (math.log(b) - math.log(a))
        le = along(rows[a], c) + f * (along(rows[b], c) - along(rows[a], c))
    return math.exp(le) * norm(q, c)


# ---- data
def load(path):
    d = json.load(gzip.open(path, "rt") if path.endswith(".gz") else open(path))
    m = d["measurements"]
    held = {(h["heads"], h["kv_heads"], h["head_dim"], h["batch"], h["q_len"], h["context"])
            for h in m["extra"]["attention"].get("held_back", []) if h["phase"] == "prefill"}
    sms = d.get("gpus", [{}])[0].get("sm_count", SMS)
    cfg = collections.defaultdict(dict)
    held_cfg = collections.defaultdict(dict)
    for a in m["attention"]:
        if a["phase"] != "prefill" or a.get("kv_dtype", "bf16") != "bf16" or a["batch"] != 1:
            continue
        k = (a["heads"], a["kv_heads"], a["head_dim"], a.get("v_dim") or a["head_dim"])
        pt = (a["q_len"], a["context"])
        (held_cfg if k[:3] + (1,) + pt in held else cfg)[k][pt] = a["median_us"] * 1e-6
    return cfg, held_cfg, bool(held), sms


def snap(q, avail):
    """The fine q_len nearest q of the same tile count (the fine data has q_len every 8 or 32 tokens)."""
    t = -(-q // TILE)
    same = [a for a in avail if -(-a // TILE) == t] or avail
    return min(same, key=lambda a: (abs(a - q), a))


def fine_rows(heads, avail, tiles=TILE_ROWS_TO):
    """The default grid's rows as the fine data has them: each quarter-octave row snapped to the nearest fine
    q_len of its tile count, the wave rows and the tile rows (to `tiles` tiles) too where missing (t x 128 + 1
    -> t x 128 + 8)."""
    top = max(avail)
    rows = {snap(q, avail) for q in log_steps(16, 8192, 4, lambda i, x: i % 2 == 0 or x >= 128) if q <= top}
    rows |= {q if q in avail else snap(q, avail) for q in wave_rows(heads) + tile_rows(tiles) if q <= top}
    return rows


def split_default(points, heads, tiles=TILE_ROWS_TO):
    """The points the default grid would have (its rows as fine_rows has them, at its contexts and the
    whole-prompt points), and the rest (to be priced from them)."""
    _, gc = default_grid(heads)
    rows = fine_rows(heads, sorted({q for q, _ in points}), tiles)
    grid = {p: t for p, t in points.items() if p[0] in rows and (p[1] in gc or p[1] == p[0])}
    top = max(rows)
    rest = {p: t for p, t in points.items() if p not in grid and 16 <= p[0] <= top}
    return grid, rest


def norms(heads, variant):
    block, order, slots, per_cta, const = variant
    def model(q, c):
        return makespan(q, c, heads, 1, block, order, slots, per_cta) + const
    return model


def errors(grid, test, norm, reach=False):
    return [(price(grid, q, c, norm, reach) / t - 1, q, c) for (q, c), t in sorted(test.items())]


def summary(e):
    a = sorted(abs(v) for v, _, _ in e)
    if not a:
        return "no points"
    w = max(e, key=lambda v: abs(v[0]))
    p90 = a[min(len(a) - 1, int(math.ceil(0.9 * len(a))) - 1)]
    return (f"worst {100 * w[0]:+5.1f} % (q{w[1]} c{w[2]}), p90 {100 * p90:4.1f} %, "
            f"{sum(x > 0.03 for x in a):3d} of {len(a):4d} over 3 %")


VARIANTS = [(128, o, 1, 0.0, k) for o in ("tile", "head") for k in (0.0, 2.0, 4.0, 8.0, 16.0)] + \
    [(64, "tile", 1, 0.0, k) for k in (0.0, 8.0, 16.0)]
BEST = (128, "head", 1, 0.0, 8.0)  # the pricer's (planner/cost/attention_grid.cpp prefill_wave_model)


def whole_prompts(paths):
    for path in paths:
        cfg, held_cfg, is_profile, sms = load(path)
        if not is_profile:
            continue
        for k in sorted(cfg):
            pts = dict(cfg[k])
            pts.update(held_cfg.get(k, {}))
            rows = sorted(q for (q, c) in pts if q == c and 100 <= q <= 2100)
            if not rows:
                continue
            print(f"{os.path.relpath(path, RUNS)} {k[0]}/{k[1]} d{k[2]}: {len(rows)} whole prompts, own row left out")
            wave = norms(k[0], BEST)
            for name, norm, reach in (("pairs, every row", work_pairs, False), ("pairs, rows reaching c", work_pairs, True),
                                      ("wave, every row", wave, False), ("wave, rows reaching c", wave, True)):
                e = [(price({p: t for p, t in pts.items() if p[0] != q}, q, q, norm, reach) / pts[(q, q)] - 1, q, q)
                     for q in rows]
                mean = 100 * sum(v for v, _, _ in e) / len(e)
                print(f"  {name:24s} {summary(e)}, mean {mean:+5.1f} %")


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    if "--whole-prompts" in sys.argv:
        return whole_prompts(args or [f"{RUNS}/2026-12-04-session8/D/profile.json.gz",
                                      f"{RUNS}/2026-12-04-session8/E/profile.json.gz"] + FILES[1:6])
    study_variants = "--variants" in sys.argv
    variant = BEST
    for a in sys.argv[1:]:
        if a.startswith("--variant="):
            b, o, s, pc, k = a.split("=", 1)[1].split(",")
            variant = (int(b), o, int(s), float(pc), float(k))
    for path in args or FILES:
        cfg, held_cfg, is_profile, sms = load(path)
        assert sms == SMS, f"{path}: {sms} SMs (the study assumes {SMS})"
        name = os.path.relpath(path, RUNS)
        for k in sorted(cfg):
            heads = k[0]
            if is_profile:
                grid, test = cfg[k], held_cfg.get(k, {})
                if not test:
                    continue
            else:
                grid, test = split_default(cfg[k], heads, 0 if "--no-tile-rows" in sys.argv else TILE_ROWS_TO)
            label = f"{name} {k[0]}/{k[1]} d{k[2]}" + (f" v{k[3]}" if k[3] != k[2] else "")
            label += " held-back" if is_profile else " fine, off-grid"
            print(label)
            print(f"  planner rule (work)     {summary(errors(grid, test, lambda q, c: work_pairs(q, c)))}")
            vs = VARIANTS if study_variants else [variant]
            for v in vs:
                print(f"  wave model {str(v):26s} {summary(errors(grid, test, norms(heads, v), reach=True))}")


if __name__ == "__main__":
    main()
