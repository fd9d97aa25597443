"""All-reduce curves of a profile side by side, median us per message size (issue 17): peerplan's one-shot and
two-shot peer-memory kernels, NCCL with P2P on and off, and, when given, PyTorch's measured in the same lease
(bench/allreduce/torch_allreduce_ref.py --out).
    python3 scripts/gpu/allreduce_table.py PROFILE.json [PROFILE-mpi.json ...] [--torch torch-allreduce.json]
"""
import json, sys

SIZES = (4096, 16384, 65536, 262144, 1 << 20, 4 << 20, 16 << 20, 64 << 20)


def row(name, gpus, by):
    return f"| {name} | {gpus} | " + " | ".join(f"{by[s]:.1f}" if s in by else "-" for s in SIZES) + " |"


def main(argv):
    torch_path = None
    if "--torch" in argv:
        i = argv.index("--torch"); torch_path = argv[i + 1]; argv = argv[:i] + argv[i + 2:]
    head = "| curve | gpus | " + " | ".join(f"{s // 1024} KiB" for s in SIZES) + " |\n|---|---|" + "---:|" * len(SIZES)
    for path in argv:
        try:
            m = json.load(open(path))["measurements"]
        except Exception as e:
            print(f"\n{path}: no profile ({e})"); continue
        print(f"\n## {path.split('/')[-1]}: all-reduce, median us (peer kernels bf16; NCCL curves as the profile times them)")
        print(head)
        g = lambda c: " (in a graph)" if c.get("graph") else ""
        for c in m.get("peer_allreduce", []):
            print(row(c["algo"] + g(c), list(c["gpus"]), {p["bytes"]: p["median_us"] for p in c["points"]}))
        for c in m.get("collectives", []):
            if c["op"] == "all_reduce":
                name = ("nccl" if c.get("p2p", True) else "nccl p2p-off") + g(c)
                print(row(name, list(c["gpus"]), {p["bytes"]: p["median_us"] for p in c["points"]}))
        na = m.get("extra", {}).get("not_applicable")
        if na:
            print(f"\nnot applicable: {json.dumps(na)[:400]}")
    if torch_path:
        try:
            t = json.load(open(torch_path))
        except Exception as e:
            print(f"\n{torch_path}: no torch figures ({e})"); return 0
        print(f"\n## PyTorch {t.get('torch', '?')} in the same lease, one process per GPU, median us")
        print(head)
        for name, by in t["results"].items():
            print(row(name, "all", {int(k): v for k, v in by.items()}))
        for name, why in t.get("unavailable", {}).items():
            print(f"unavailable: {name}: {why}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
