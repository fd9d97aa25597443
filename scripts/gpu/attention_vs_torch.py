"""The executor's prefill attention (chunk bench, bench/attention/chunk_bench.cu, its JSON lines) beside the fastest
torch SDPA backend of .gpu-ref/torch_attn_ref.py in the same lease, per reference shape; issue 18 asks >= 0.9x.
    python3 scripts/gpu/attention_vs_torch.py OUT_DIR   (holds torch_attn_ref.json and chunk_bench.jsonl)
"""
import json, sys, os
out = sys.argv[1]
ref = json.load(open(os.path.join(out, "torch_attn_ref.json")))
ours = {}
for line in open(os.path.join(out, "chunk_bench.jsonl")):
    r = json.loads(line)
    if "q_len" in r and r.get("path") in ("cudnn-paged", "own"):
        ours.setdefault((r["q_len"], r["ctx"]), {})[r["path"]] = r["ms"]
ok = True
print(f"{'q_len':>6} {'ctx':>6} {'exec ms':>8} {'best torch':>18} {'ratio':>6}")
for c in ref["cases"]:
    best = min(((v["ms"], k) for k, v in c.items() if isinstance(v, dict) and "ms" in v), default=None)
    mine = ours.get((c["q_len"], c["ctx"]), {})
    ms = mine.get("cudnn-paged", mine.get("own"))
    if best is None or ms is None:
        print(c["q_len"], c["ctx"], "missing"); ok = False; continue
    ratio = best[0] / ms
    ok &= ratio >= 0.9
    print(f"{c['q_len']:>6} {c['ctx']:>6} {ms:>8.3f} {best[0]:>8.3f} ({best[1]:>9}) {ratio:>6.2f}")
print(("PASS" if ok else "FAIL") + " executor prefill attention >= 0.9x the fastest torch SDPA backend on every shape")
