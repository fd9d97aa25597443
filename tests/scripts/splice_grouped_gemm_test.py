#!/usr/bin/env python3
"""scripts/splice_grouped_gemm.py: a source's rows replace the target's of the same key; with --replace every
target row of a shape the source times goes (one kernel generation per curve), other shapes stay; a source of
another GPU model is refused and the target is left as it was."""
import json, os, subprocess, sys, tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SPLICE = os.path.join(ROOT, "scripts", "splice_grouped_gemm.py")


def row(n, tokens, us, dtype="bf16"):
    return {"gpu": 1, "n": n, "k": 2048, "experts": 60, "topk": 4, "tokens": tokens, "rows": 4 * tokens,
            "touched": min(60, 4 * tokens), "max_rows": 1, "dtype": dtype, "median_us": us}


def profile(gpu, rows):
    return {"gpus": [{"name": gpu}], "measurements": {"meta": {"date": "d"}, "grouped_gemms": rows}}


def run(tmp, target, source, *flags):
    t, s = os.path.join(tmp, "t.json"), os.path.join(tmp, "s.json")
    json.dump(target, open(t, "w")); json.dump(source, open(s, "w"))
    r = subprocess.run([sys.executable, SPLICE, t, s, *flags], capture_output=True, text=True)
    return r.returncode, json.load(open(t)), r.stderr


def main():
    fails = []
    def check(cond, what):
        if not cond: fails.append(what)
    with tempfile.TemporaryDirectory() as tmp:
        old = [row(2816, 1, 10), row(2816, 4, 20), row(2816, 4, 30, "fp8"), row(1408, 1, 5)]
        new = [row(2816, 1, 9)]
        rc, out, _ = run(tmp, profile("H200", old), profile("H200", new))
        got = {(e["n"], e["tokens"], e["dtype"]): e["median_us"] for e in out["measurements"]["grouped_gemms"]}
        check(rc == 0 and got == {(2816, 1, "bf16"): 9, (2816, 4, "bf16"): 20, (2816, 4, "fp8"): 30, (1408, 1, "bf16"): 5},
              f"merge by key: {got}")
        check(all(e["gpu"] == 0 for e in out["measurements"]["grouped_gemms"] if e["median_us"] == 9), "source rows on GPU 0")
        rc, out, _ = run(tmp, profile("H200", old), profile("H200", new), "--replace")
        got = {(e["n"], e["tokens"], e["dtype"]): e["median_us"] for e in out["measurements"]["grouped_gemms"]}
        check(rc == 0 and got == {(2816, 1, "bf16"): 9, (2816, 4, "fp8"): 30, (1408, 1, "bf16"): 5}, f"--replace: {got}")
        check(out["measurements"]["meta"]["grouped_gemm_source"]["entries"] == 1, "provenance")
        # One expert's cuBLAS-path curve goes with the rows: merged by (n, k, dtype, rows), --replace drops
        # the target's curve of a shape the source times; absent from both, the key is not written.
        ex = lambda n, r, us: {"gpu": 1, "n": n, "k": 2048, "rows": r, "dtype": "int8", "median_us": us}
        tgt = profile("H200", old); tgt["measurements"]["expert_gemms"] = [ex(2816, 32, 5), ex(2816, 64, 6), ex(1408, 32, 3)]
        src = profile("H200", new); src["measurements"]["expert_gemms"] = [ex(2816, 32, 4)]
        rc, out, _ = run(tmp, tgt, src)
        got = {(e["n"], e["rows"]): e["median_us"] for e in out["measurements"]["expert_gemms"]}
        check(rc == 0 and got == {(2816, 32): 4, (2816, 64): 6, (1408, 32): 3}, f"expert curve merged: {got}")
        rc, out, _ = run(tmp, tgt, src, "--replace")
        got = {(e["n"], e["rows"]): e["median_us"] for e in out["measurements"]["expert_gemms"]}
        check(rc == 0 and got == {(2816, 32): 4, (1408, 32): 3}, f"expert curve --replace: {got}")
        rc, out, _ = run(tmp, profile("H200", old), profile("H200", new))
        check("expert_gemms" not in out["measurements"], "no expert curve written where neither has one")
        # --fill-gemms: the source's dense GEMM rows of shapes the target lacks are added, the target's own kept,
        # and a source of GEMMs only is accepted then (not without the flag).
        g = lambda n, m, us: {"gpu": 1, "n": n, "k": 2048, "m": m, "dtype": "bf16", "median_us": us}
        tgt = profile("H200", old); tgt["measurements"]["gemms"] = [g(4096, 1, 7)]
        src = profile("H200", []); src["measurements"]["gemms"] = [g(4096, 1, 99), g(60, 1, 3), g(60, 2, 4)]
        rc, out, _ = run(tmp, tgt, src, "--fill-gemms")
        got = sorted((e["n"], e["m"], e["median_us"], e["gpu"]) for e in out["measurements"]["gemms"])
        check(rc == 0 and got == [(60, 1, 3, 0), (60, 2, 4, 0), (4096, 1, 7, 1)], f"--fill-gemms: {got}")
        check(len(out["measurements"]["grouped_gemms"]) == 4, "--fill-gemms without grouped rows keeps the target's")
        m = out["measurements"]["meta"]
        check("grouped_gemm_source" not in m and m["gemm_fill_source"]["entries"] == 2, f"provenance of the fill: {m}")
        rc, out, _ = run(tmp, tgt, src)
        check(rc != 0 and len(out["measurements"]["gemms"]) == 1, "a GEMM-only source needs --fill-gemms")
        rc, out, err = run(tmp, profile("H200", old), profile("H100", new), "--replace")
        check(rc != 0 and "H100" in err and len(out["measurements"]["grouped_gemms"]) == 4, f"other GPU refused: {rc} {err}")
    for f in fails: print("FAIL:", f)
    print("splice_grouped_gemm:", "ok" if not fails else f"{len(fails)} failed")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
