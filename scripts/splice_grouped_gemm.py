#!/usr/bin/env python3
"""Add the grouped expert GEMM curves of a one-GPU profile to a multi-GPU profile of the same GPU model.

The routed-MoE kernels are timed on one GPU (`profile --only grouped_gemm`: each expert shape with all
experts local, and the EP shards at TP 1), so a one-GPU run on the same GPU model gives a multi-GPU
profile the curves its links were measured without. Entries are keyed by (n, k, experts, topk, tokens,
dtype, rows, touched, max_rows); the source's replace the target's of the same key, the target's others stay.
The source's one-expert cuBLAS-path curve (expert_gemms, keyed by n, k, dtype, rows) goes with them, the same way.
--replace drops every target entry of a shape (n, k, experts, topk, dtype) the source times, so one shape's
curve is never two kernel generations' rows. The source's provenance goes to measurements.meta.grouped_gemm_source.
--fill-gemms also adds the source's dense GEMM rows ("gemms") of every shape (n, k, dtype, batch) the target has no
row of, never touching the target's own: the GEMMs profiles gained in session 31 (MoE routers, Qwen-MoE's
shared-expert gate, MLA's projections) for a profile timed before them. A source may then hold no grouped rows.

usage: scripts/splice_grouped_gemm.py TARGET.json SOURCE.json[.gz] [--replace] [--fill-gemms] [--note TEXT]
                                      [--out OUT.json]
"""
import argparse, gzip, json, os, sys, tempfile


def load(path):
    with (gzip.open(path, "rt") if path.endswith(".gz") else open(path)) as f:
        return json.load(f)


def key(e):
    # A token count is timed under several routings (distinct busiest-expert rows: the count picks the
    # kernel), so the routing's figures are part of the key, as in the profile merge (profile_merge.cpp).
    return (e["n"], e["k"], e["experts"], e["topk"], e["tokens"], e.get("dtype", "bf16"),
            e.get("rows", 0), e.get("touched", 0), e.get("max_rows", 0))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("target"); ap.add_argument("source")
    ap.add_argument("--note", default=""); ap.add_argument("--out")
    ap.add_argument("--replace", action="store_true", help="drop the target's entries of every shape the source times")
    ap.add_argument("--fill-gemms", action="store_true",
                    help="add the source's dense GEMM rows of shapes the target lacks (never replaces the target's)")
    a = ap.parse_args()
    tgt, src = load(a.target), load(a.source)
    new = src["measurements"].get("grouped_gemms") or []
    dense = src["measurements"].get("gemms") or []
    if not new and not (a.fill_gemms and dense):
        sys.exit(f"{a.source}: measurements.grouped_gemms is empty: profile an MoE model with `profile --only grouped_gemm`"
                 + (" (or its GEMMs with `profile --only gemm` for --fill-gemms)" if a.fill_gemms else ""))
    tg, sg = (tgt.get("gpus") or [{}])[0].get("name"), (src.get("gpus") or [{}])[0].get("name")
    if tg != sg:
        sys.exit(f"{a.source} timed a {sg}, {a.target} describes a {tg}: the curves would not be this GPU's")
    shapes = {key(e)[:4] + key(e)[5:6] for e in new}
    merged = {key(e): e for e in tgt["measurements"].get("grouped_gemms") or []
              if not (a.replace and key(e)[:4] + key(e)[5:6] in shapes)}
    for e in new:
        e = dict(e); e["gpu"] = 0
        merged[key(e)] = e
    tgt["measurements"]["grouped_gemms"] = sorted(merged.values(), key=key)
    # One expert's cuBLAS-path curve (expert_gemms, profiles from session 29) goes with the grouped rows:
    # the pricer needs both (the grouped rows' expert_rows less this curve is the path's fixed part).
    ekey = lambda e: (e["n"], e["k"], e.get("dtype", "bf16"), e["rows"])
    enew = src["measurements"].get("expert_gemms") or []
    eshapes = {ekey(e)[:3] for e in enew}
    emerged = {ekey(e): e for e in tgt["measurements"].get("expert_gemms") or []
               if not (a.replace and ekey(e)[:3] in eshapes)}
    for e in enew:
        e = dict(e); e["gpu"] = 0
        emerged[ekey(e)] = e
    if emerged:
        tgt["measurements"]["expert_gemms"] = sorted(emerged.values(), key=ekey)
    # Dense GEMM rows of shapes the target has none of (--fill-gemms).
    gshape = lambda e: (e["n"], e["k"], e.get("dtype", "bf16"), e.get("batch", 1))
    filled = []
    if a.fill_gemms:
        have = {gshape(e) for e in tgt["measurements"].get("gemms") or []}
        filled = [dict(e, gpu=0) for e in dense if gshape(e) not in have]
        tgt["measurements"]["gemms"] = (tgt["measurements"].get("gemms") or []) + filled
    sm = src["measurements"].get("meta", {})
    prov = {"date": sm.get("date"), "driver": sm.get("driver"), "cuda_runtime": sm.get("cuda_runtime"), "gpu": sg,
            "note": a.note}
    if new:  # a GEMM-only source keeps the provenance of the grouped rows the target has
        tgt["measurements"].setdefault("meta", {})["grouped_gemm_source"] = dict(
            prov, entries=len(new), expert_entries=len(enew))
    if filled:
        tgt["measurements"].setdefault("meta", {})["gemm_fill_source"] = dict(prov, entries=len(filled))
    dst = a.out or a.target
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(os.path.abspath(dst)) or ".", suffix=".json")
    with os.fdopen(fd, "w") as f:
        json.dump(tgt, f, indent=1)
        f.write("\n")
    os.replace(tmp, dst)
    print(f"{dst}: {len(new)} grouped GEMM entries from {a.source} ({sm.get('date')}), {len(merged)} in all"
          + (f"; {len(filled)} GEMM rows of {len({gshape(e) for e in filled})} shapes it lacked" if a.fill_gemms else ""))


if __name__ == "__main__":
    main()
