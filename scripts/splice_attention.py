#!/usr/bin/env python3
"""Replace the attention section of a profile with newer figures of the same kernels.

Attention is timed on one GPU (each TP rank runs its own head shard), so after the executor's
attention kernels change, a one-GPU run of scripts/gpu/attention_shards.sh on the same GPU model
refreshes a multi-GPU profile without re-measuring its links. Entries are matched by
(phase, heads, kv_heads, head_dim, batch, context, q_len); every head configuration the target
holds must be in the source, or nothing is written. The source's provenance goes to
measurements.meta.attention_source, so the profile says which figures are from which run.

usage: scripts/splice_attention.py TARGET.json SOURCE.json [--note TEXT] [--out OUT.json]
"""
import argparse, json, os, sys, tempfile

def key(e):
    return (e["phase"], e["heads"], e["kv_heads"], e["head_dim"], e["batch"], e["context"], e.get("q_len", 1))

def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("target"); ap.add_argument("source")
    ap.add_argument("--note", default=""); ap.add_argument("--out")
    a = ap.parse_args()
    tgt = json.load(open(a.target)); src = json.load(open(a.source))
    old = tgt["measurements"]["attention"]; new = src["measurements"]["attention"]
    have = {key(e): e for e in new}
    missing = sorted({k[:4] for k in map(key, old)} - {k[:4] for k in have})
    if missing:
        sys.exit(f"{a.source}: measurements.attention lacks head configurations {missing} that {a.target} holds; "
                 "run scripts/gpu/attention_shards.sh with every MODEL:TP the target needs")
    gpu = old[0].get("gpu", 0) if old else 0
    out = []
    for e in new:
        e = dict(e); e["gpu"] = gpu
        out.append(e)
    tgt["measurements"]["attention"] = out
    sm = src["measurements"].get("meta", {})
    tgt["measurements"].setdefault("meta", {})["attention_source"] = {
        "date": sm.get("date"), "driver": sm.get("driver"), "cuda_runtime": sm.get("cuda_runtime"),
        "gpu": (src.get("gpus") or [{}])[0].get("name"), "entries": len(out), "note": a.note}
    dst = a.out or a.target
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(os.path.abspath(dst)) or ".", suffix=".tmp")
    with os.fdopen(fd, "w") as f:
        json.dump(tgt, f, indent=1, sort_keys=True); f.write("\n")
    os.replace(tmp, dst)  # atomic: the old profile stays whole if anything above failed
    print(f"{dst}: attention replaced ({len(old)} -> {len(out)} entries) from {a.source}")

if __name__ == "__main__":
    main()
