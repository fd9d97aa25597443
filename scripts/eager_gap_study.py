#!/usr/bin/env python3
"""Issue 18/14: how the eager (non-CUDA-graph) prefill / mixed iterations of recorded GPU runs compare with their
price, by op count and kind, and what other pricings of the per-op launch gap would have predicted. CPU only.

  scripts/eager_gap_study.py BUILD/peerplan [substring ...]    (substrings select runs, as revalidate_offline.py)
  scripts/eager_gap_study.py --targets BUILD/peerplan           (revalidate_offline.py's count of runs meeting all
      targets, each run re-predicted with its profile's launch_overhead_us replaced by each constant gap rule:
      the eager gap is the only thing that field prices, CostModel::launch_s)

For each recorded run (revalidate_offline.RUNS that kept an iterations.json.gz) it
  1. simulates, on the run's own profile, crafted workloads whose iterations have the recorded prefill token counts:
     isolated requests of one output token (pure prefill), and the same beside one long decode (mixed, one decode
     sequence), with a Chrome trace (`simulate --trace`), which lists each iteration's ops with their priced
     kernel time and the gap in front of each;
  2. matches every recorded eager iteration to the traced iteration of the same kind and nearest token count, and
     re-prices it with each candidate gap rule: price - sum(HEAD gaps) + sum(rule gaps), where the kernel times are
     scaled so the HEAD rule gives back the recorded price exactly;
  3. prints GPU span / price per run and iteration kind under each rule, and sum |log(GPU / price)| over the
     iterations (the fit), for all eager iterations and for those whose host did not stall (a first-use cuDNN plan
     build in the executor's enqueue, slowest_enqueues > STALL_US, lets the GPU idle 1-2 ms).
Rules (L = the profile's launch_overhead_us, the host's back-to-back empty-kernel launch period; g = gpu_gap_us,
the GPU's own spacing of back-to-back kernels; d = an op's priced kernel time, which for table-priced ops was
itself timed back to back and so holds one g):
  head       L per op (CostModel::launch_s)
  gpu_gap    g per op
  local      max(g, L - d): the GPU waits for the host when the kernel is shorter than one launch
  recur_L    host issues every L; GPU op i starts at max(end of op i-1 + g, host issue of op i)
  recur_h    as recur_L with the host period the run really had (its enqueue time / ops): an oracle, for insight
  small_g    by op kind: g for the elementwise ops (norms, rotary, activation, routing, residual), L for the rest
  big_g      by op kind: L for the elementwise ops, g for GEMMs, grouped GEMMs and attention
Nothing here changes the pricer; the rules are evaluated on the traced op lists."""
import bisect, gzip, importlib.util, json, math, os, shutil, subprocess, sys, tempfile
from collections import defaultdict

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
spec = importlib.util.spec_from_file_location("revalidate_offline", os.path.join(ROOT, "scripts/revalidate_offline.py"))
rv = importlib.util.module_from_spec(spec)
spec.loader.exec_module(rv)

STALL_US = 500.0  # a host enqueue this slow (cuDNN building a plan for a new shape) idles the GPU
RULES = ["head", "gpu_gap", "local", "recur_L", "recur_h", "small_g", "big_g"]


def op_class(name, kind):
    """The op's class from its OpKind (op_graph.hpp to_string): the elementwise ops (norms, residual adds, rotary,
    activation, MoE routing / combine) and the embedding are "small"."""
    return {"gemm": "gemm", "grouped_gemm": "moe_gemm", "attention": "attention", "elementwise": "small",
            "embedding": "small"}.get(kind, "collective")


def write_workload(tmp, base_workload, rows, tag):
    """A workload replaying `rows` [(arrival_s, prompt, output)] with the recorded run's batching."""
    base = json.load(open(base_workload))
    csv = os.path.join(tmp, f"{tag}.csv")
    with open(csv, "w") as f:
        f.write("TIMESTAMP,ContextTokens,GeneratedTokens\n")
        for t, p, o in rows:
            h, rem = divmod(t, 3600.0)
            m, s = divmod(rem, 60.0)
            f.write(f"2023-11-16 {int(h):02d}:{int(m):02d}:{s:010.7f},{p},{o}\n")
    w = {"version": 1, "name": tag, "arrival": {"process": "trace", "file": csv},
         "batching": base["batching"], "num_requests": len(rows), "seed": 1}
    for k in ("slo",):
        if k in base:
            w[k] = base[k]
    path = os.path.join(tmp, f"{tag}.json")
    json.dump(w, open(path, "w"))
    return path


def traced_iterations(binary, plan_file, model, machine, workload, extra, tmp, records):
    """[(kind, prefill_tokens, decode_seqs, [(name, class, dur_us, gap_us)])] of the trace's eager iterations."""
    trace = os.path.join(tmp, "trace.json")
    cmd = [binary, "simulate", "--plan", plan_file, "--model", model, "--machine", machine, "--workload", workload,
           "--out", os.path.join(tmp, "pred.json"), "--trace", trace, "--trace-iterations", str(records)]
    # --requests / --rate of the recorded run do not apply to the crafted workload; --weights etc. do.
    keep, i = [], 0
    while i < len(extra):
        if extra[i] in ("--requests", "--rate"):
            i += 2
            continue
        keep.append(extra[i])
        i += 1
    r = subprocess.run(cmd + keep, capture_output=True, text=True, cwd=ROOT)
    if r.returncode:
        raise RuntimeError(r.stderr.strip()[-400:])
    ev = json.load(open(trace))["traceEvents"]
    iters = [e for e in ev if e.get("cat") == "iteration" and e.get("tid") == 0]
    ops = sorted((e for e in ev if e.get("cat") in ("compute", "collective") and e.get("tid") == 0),
                 key=lambda e: e["ts"])
    starts = [e["ts"] for e in ops]
    out = []
    for it in iters:
        shape = it["args"]["shape"]
        if "prefill" not in shape:
            continue
        tok = int(shape.split()[1])
        dseq = int(shape.split("+ decode ")[1].split()[0]) if "+ decode" in shape else 0
        a, z = it["ts"], it["ts"] + it["dur"]
        lo, hi = bisect.bisect_left(starts, a - 1e-6), bisect.bisect_right(starts, z + 1e-6)
        lst, prev_end = [], a
        for e in ops[lo:hi]:
            lst.append((e["name"], op_class(e["name"], e["args"].get("kind", "")), e["dur"], e["ts"] - prev_end))
            prev_end = e["ts"] + e["dur"]
        out.append(("mixed" if dseq else "prefill", tok, dseq, lst))
    return out


def rule_span(rule, durs, L, g, h, classes=None):
    """Span of one iteration's ops under a gap rule (us)."""
    if rule in ("small_g", "big_g"):
        small = rule == "small_g"
        return sum(d + ((g if small else L) if c == "small" else (L if small else g)) for d, c in zip(durs, classes))
    if rule == "head":
        return sum(d + L for d in durs)
    if rule == "gpu_gap":
        return sum(d + g for d in durs)
    if rule == "local":
        return sum(d + max(g, L - d) for d in durs)
    period = L if rule == "recur_L" else h
    host, end = 0.0, 0.0
    for d in durs:
        host += period
        end = max(end + g, host) + d
    return end


def study_run(binary, run, plan, model, workload, extra, tmp, only_kinds=None):
    rec = json.load(gzip.open(os.path.join(run, "iterations.json.gz")))["iterations"]
    eager = [x for x in rec if not x["graph"] and x["prefill_tokens"] > 0 and x.get("replica", 0) == 0]
    if not eager:
        return None
    gz = os.path.join(run, "machine-extended.json.gz")
    if not os.path.exists(gz):
        gz = os.path.join(os.path.dirname(run), "profile.json.gz")
    machine = os.path.join(tmp, "machine.json")
    with gzip.open(gz, "rb") as f, open(machine, "wb") as o:
        shutil.copyfileobj(f, o)
    meas = json.load(open(machine))["measurements"]
    L = meas["launch_overhead_us"]
    g = meas["extra"]["launch"]["gpu0"]["gpu_gap_us"]
    plan_file = plan if plan.endswith(".json") else os.path.join(rv.P, plan + ".json")
    max_tok = json.load(open(workload))["batching"]["max_batched_tokens"]
    toks = sorted({min(x["prefill_tokens"], max_tok - 8) for x in eager})
    # Pure prefills: one isolated request each, 2 s apart (every prefill here is shorter).
    gap_s = 2.0
    pure = write_workload(tmp, workload, [(1.0 + i * gap_s, t, 1) for i, t in enumerate(toks)], "pure")
    traced = traced_iterations(binary, plan_file, model, machine, pure, extra, tmp, 4 * len(toks) + 8)
    # Mixed: the same prefills beside one long decode (arrivals 0.2 s apart: a few decode steps between).
    step = 0.2
    rows = [(0.0, 16, 4000)] + [(0.5 + i * step, t, 1) for i, t in enumerate(toks)]
    mixed = write_workload(tmp, workload, rows, "mixed")
    traced += traced_iterations(binary, plan_file, model, machine, mixed, extra, tmp, 200 * len(toks) + 200)
    by_kind = defaultdict(list)
    for kind, tok, dseq, lst in traced:
        if lst:
            by_kind[kind].append((tok, lst))
    for k in by_kind:
        by_kind[k].sort()
    rows = []
    for x in eager:
        kind = "mixed" if x["decode_seqs"] > 0 else "prefill"
        cands = by_kind.get(kind) or by_kind.get("prefill")
        if not cands:
            continue
        t = x["prefill_tokens"]
        tok, lst = min(cands, key=lambda c: abs(math.log(max(c[0], 1)) - math.log(max(t, 1))))
        durs = [d for _, _, d, _ in lst]
        n = len(durs)
        head_gaps = n * L
        K = sum(durs)
        P = x["predicted_us"]
        scale = max(P - head_gaps, 1.0) / K if K > 0 else 1.0  # kernel times as the recorded price had them
        sd = [d * scale for d in durs]
        span = x["gpu_end_us"] - x["gpu_start_us"]
        enq = x["host_enqueued_us"] - x["host_begin_us"] - x["compile_us"]
        slow = 0.0
        for part in (x.get("slowest_enqueues") or "").split(";"):
            if part.strip().endswith("us"):
                try:
                    slow = max(slow, float(part.split(":")[-1].split()[0]))
                except ValueError:
                    pass
        h = enq / n if n else L
        classes = [c for _, c, _, _ in lst]
        prices = {r: P - head_gaps + (rule_span(r, sd, L, g, h, classes) - sum(sd)) for r in RULES}
        cls = defaultdict(lambda: [0, 0.0])
        for name, c, d, _ in lst:
            cls[c][0] += 1
            cls[c][1] += d * scale
        rows.append({"kind": kind, "tokens": t, "n": n, "span": span, "P": P, "prices": prices,
                     "stall": slow > STALL_US, "h": h, "L": L, "g": g, "cls": dict(cls),
                     "matched": tok, "short": sum(1 for d in sd if d < L)})
    return rows


BUCKETS = [(0, 256), (256, 1024), (1024, 4096), (4096, 1 << 30)]


def summarize(tag, rows):
    """Per kind and prefill-token bucket, iterations whose host did not stall: GPU / price under each rule and the
    effective gap, (GPU span - priced kernel time) / ops, the per-op time the GPU spent beyond the priced kernels."""
    out = []
    for kind in ("prefill", "mixed"):
        for lo, hi in BUCKETS:
            rs = [r for r in rows if r["kind"] == kind and not r["stall"] and lo <= r["tokens"] < hi]
            if not rs:
                continue
            span = sum(r["span"] for r in rs)
            cells = []
            for rule in RULES:
                p = sum(r["prices"][rule] for r in rs)
                fit = sum(abs(math.log(r["span"] / r["prices"][rule])) for r in rs) / len(rs)
                cells.append(f"{span / p:6.3f} ({100 * fit:4.1f})")
            eff = sorted((r["span"] - (r["P"] - r["n"] * r["L"])) / r["n"] for r in rs)[len(rs) // 2]
            n = sum(r["n"] for r in rs) / len(rs)
            h = sum(r["h"] for r in rs) / len(rs)
            ms = span / len(rs) / 1e3
            out.append(f"{tag:46s} {kind:7s} {lo:5d}- {len(rs):4d} {ms:7.2f} {n:5.0f} {h:5.1f} {rs[0]['L']:4.2f} "
                       f"{eff:6.2f} " + " ".join(f"{c:>15s}" for c in cells))
    # Over kinds, below and from 1024 prefill tokens; and span = a * (priced kernel time) + e * ops fitted by least
    # squares over the no-stall iterations (a: how the kernels' prices scale, e: the per-op time beyond them).
    cells = []
    for name, sel in (("< 1024 tok", lambda r: r["tokens"] < 1024), (">= 1024 tok", lambda r: r["tokens"] >= 1024)):
        rs = [r for r in rows if not r["stall"] and sel(r)]
        if rs:
            span = sum(r["span"] for r in rs)
            cells.append(f"{name}: {len(rs)} iterations, GPU / price head {span / sum(r['P'] for r in rs):.3f}, "
                         f"g {span / sum(r['prices']['gpu_gap'] for r in rs):.3f}")
    rs = [r for r in rows if not r["stall"]]
    if len(rs) >= 3:
        X = [(r["P"] - r["n"] * r["L"], r["n"]) for r in rs]
        y = [r["span"] for r in rs]
        sxx = sum(a * a for a, _ in X); sxn = sum(a * b for a, b in X); snn = sum(b * b for _, b in X)
        sxy = sum(a * v for (a, _), v in zip(X, y)); sny = sum(b * v for (_, b), v in zip(X, y))
        det = sxx * snn - sxn * sxn
        if det:
            a, e = (sxy * snn - sxn * sny) / det, (sxx * sny - sxn * sxy) / det
            fit = sum(abs(math.log(v / (a * k + e * n))) for (k, n), v in zip(X, y)) / len(y)
            cells.append(f"fit: span = {a:.3f} x kernels + {e:.2f} us x ops (mean |log error| {100 * fit:.1f} %)")
    out.append(f"{tag:46s} " + "; ".join(cells))
    st = [r for r in rows if r["stall"]]
    if st:
        span, p = sum(r["span"] for r in st), sum(r["P"] for r in st)
        out.append(f"{tag:46s} stalled (a slow enqueue > {STALL_US:.0f} us): {len(st)} iterations, GPU / price "
                   f"(head) {span / p:.3f}, {(span - p) / len(st) / 1e3:+.2f} ms each")
    return out


def class_table(tag, rows):
    """Per op class: ops per iteration and their summed priced kernel time, no-stall iterations."""
    rs = [r for r in rows if not r["stall"]]
    if not rs:
        return []
    tot = defaultdict(lambda: [0, 0.0])
    for r in rs:
        for c, (n, d) in r["cls"].items():
            tot[c][0] += n
            tot[c][1] += d
    k = len(rs)
    return [f"  {tag:44s} " + "  ".join(f"{c}: {tot[c][0] / k:.0f} ops, {tot[c][1] / tot[c][0]:.1f} us/op"
                                        for c in sorted(tot))]


GAP_RULES = {"L (head)": lambda L, g: L, "0.75 L": lambda L, g: 0.75 * L, "(L + g) / 2": lambda L, g: (L + g) / 2,
             "g": lambda L, g: g, "1.25 L": lambda L, g: 1.25 * L}


def targets(binary):
    """Runs meeting all three of revalidate_offline.py's targets with each constant eager gap."""
    tmp = tempfile.mkdtemp(prefix="eager-gap-targets-")
    met = defaultdict(int)
    broken = defaultdict(list)
    errs = defaultdict(list)
    try:
        for run, plan, model, workload, extra in rv.RUNS:
            tag = os.path.relpath(run, rv.V + "/runs")
            gz = os.path.join(run, "machine-extended.json.gz")
            if not os.path.exists(gz):
                gz = os.path.join(os.path.dirname(run), "profile.json.gz")
            prof = json.load(gzip.open(gz))
            m = prof.get("measurements") or {}
            L = m.get("launch_overhead_us") or 4.5
            g = (((m.get("extra") or {}).get("launch") or {}).get("gpu0") or {}).get("gpu_gap_us") or 1.5
            meas = json.load(open(os.path.join(run, "measured.metrics.json")))
            rec = json.load(open(os.path.join(run, "predicted.metrics.json")))
            plan_file = plan if plan.endswith(".json") else os.path.join(rv.P, plan + ".json")
            cells = []
            for name, rule in GAP_RULES.items():
                if "measurements" in prof:
                    prof["measurements"]["launch_overhead_us"] = rule(L, g)
                machine = os.path.join(tmp, "machine.json")
                json.dump(prof, open(machine, "w"))
                out = os.path.join(tmp, "pred.json")
                r = subprocess.run([binary, "simulate", "--plan", plan_file, "--model", model, "--machine", machine,
                                    "--workload", workload, "--out", out] + extra, capture_output=True, text=True,
                                   cwd=ROOT)
                if r.returncode:
                    cells.append("failed")
                    continue
                now = json.load(open(out))
                ok, then, band = True, True, True
                es = []
                for metric, q in (("ttft", "p50_us"), ("tpot", "p50_us"), ("e2e", "p99_us")):
                    e = now[metric][q] / meas[metric][q] - 1
                    e0 = rec[metric][q] / meas[metric][q] - 1
                    es.append(e)
                    ok = ok and abs(e) <= rv.TARGETS[metric]
                    then = then and abs(e0) <= rv.TARGETS[metric]
                    band = band and abs(e) <= rv.TARGETS[metric] + rv.BAND
                met[name] += ok
                errs[name].append(abs(es[0]))
                if then and not band:
                    broken[name].append(tag)
                cells.append(" ".join(f"{100 * e:+5.1f}" for e in es) + (" ok" if ok else "   "))
            print(f"{tag:52s} " + " | ".join(f"{c:20s}" for c in cells), flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"{'':52s} " + " | ".join(f"{n:20s}" for n in GAP_RULES))
    for name in GAP_RULES:
        print(f"{name:12s}: {met[name]} of {len(rv.RUNS)} runs meet all three targets; mean |TTFT p50 error| "
              f"{100 * sum(errs[name]) / max(len(errs[name]), 1):.1f} %; met on the GPU and missed by more than the "
              f"band: {', '.join(broken[name]) or 'none'}")


def main():
    args = sys.argv[1:]
    if not args:
        sys.exit(__doc__)
    if args[0] == "--targets":
        return targets(os.path.abspath(args[1]))
    binary, only = os.path.abspath(args[0]), args[1:]
    tmp = tempfile.mkdtemp(prefix="eager-gap-")
    lines, classes, allrows = [], [], []
    try:
        for run, plan, model, workload, extra in rv.RUNS:
            tag = os.path.relpath(run, rv.V + "/runs")
            if only and not any(o in tag for o in only):
                continue
            if not os.path.exists(os.path.join(run, "iterations.json.gz")):
                continue
            try:
                rows = study_run(binary, run, plan, model, workload, extra, tmp)
            except (RuntimeError, KeyError) as e:
                print(f"{tag}: skipped: {e}", file=sys.stderr)
                continue
            if not rows:
                continue
            allrows += [(tag, r) for r in rows]
            lines += summarize(tag, rows)
            classes += class_table(tag, rows)
            print(lines[-1], file=sys.stderr)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print("GPU span / price per run, kind and prefill tokens (from), iterations without a host stall, under each "
          "rule (in brackets: mean |log(GPU / price)| over the iterations, %); eff = median (GPU span - priced kernel "
          "time) / ops, us; h = host enqueue per op, us; L = the profile's launch overhead, us")
    print(f"{'run':46s} {'kind':7s} {'tok':>6s} {'n':>4s} {'GPU ms':>7s} {'ops':>5s} {'h':>5s} {'L':>4s} {'eff':>6s} "
          + " ".join(f"{r:>15s}" for r in RULES))
    for l in lines:
        print(l)
    print("\nop classes of the no-stall iterations (count per iteration, mean priced kernel time)")
    for l in classes:
        print(l)


if __name__ == "__main__":
    main()
