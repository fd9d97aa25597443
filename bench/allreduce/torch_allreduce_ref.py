"""PyTorch's all-reduces on this host, the reference for peerplan's peer-memory all-reduce curves (issue 17).

Times, per bf16 message size, torch's symmetric-memory one-shot and two-shot all-reduce (what SGLang's
torch-symm-mem communicator calls) and NCCL's all_reduce through torch.distributed, each as the median of
CUDA-event timings of ITERS back-to-back calls (per-call time; the same way the profile's curves are
timed: a stream of calls, no host sync between them). Run one process per GPU:
    torchrun --nproc_per_node 2 bench/allreduce/torch_allreduce_ref.py [--out ref.json]
Rank 0 prints a table and writes JSON {impl: {bytes: median_us}}. An implementation torch lacks on this
host (older torch, no P2P) is reported as unavailable with the reason, not skipped silently.
"""
import argparse, json, os, statistics, sys
import torch
import torch.distributed as dist

SIZES = [4 << 10, 16 << 10, 64 << 10, 256 << 10, 1 << 20, 4 << 20, 16 << 20, 64 << 20]


def time_calls(fn, iters, reps=7):
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    samples = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        dist.barrier()
        torch.cuda.synchronize()
        a.record()
        for _ in range(iters):
            fn()
        b.record()
        b.synchronize()
        samples.append(a.elapsed_time(b) * 1000.0 / iters)
    return statistics.median(samples)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="")
    ap.add_argument("--iters", type=int, default=50)
    args = ap.parse_args()
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", rank)))
    dist.init_process_group("nccl", device_id=torch.device("cuda", torch.cuda.current_device()))
    group = dist.group.WORLD
    results, unavailable = {}, {}
    try:
        import torch.distributed._symmetric_memory as symm_mem
        buf = symm_mem.empty(max(SIZES) // 2, dtype=torch.bfloat16, device="cuda")
        symm_mem.rendezvous(buf, group.group_name)
    except Exception as e:  # the reference must say why it has no symmetric-memory figures
        symm_mem, buf = None, None
        unavailable["symm_mem"] = f"{type(e).__name__}: {e}"[:300]
    for size in SIZES:
        n = size // 2
        x = torch.randn(n, dtype=torch.bfloat16, device="cuda")
        if buf is not None:
            view = buf[:n]
            view.copy_(x)
            for name, fn in (("torch symm_mem one_shot", lambda: torch.ops.symm_mem.one_shot_all_reduce(view, "sum", group.group_name)),
                             ("torch symm_mem two_shot", lambda: torch.ops.symm_mem.two_shot_all_reduce_(view, "sum", group.group_name))):
                if name in unavailable:
                    continue
                try:
                    if name.endswith("one_shot"):  # the sum checked once: every rank holds the same x
                        view.fill_(1.0)
                        dist.barrier(); torch.cuda.synchronize()
                        y = fn(); torch.cuda.synchronize()
                        if not torch.all(y == world):
                            raise RuntimeError("one_shot sum wrong")
                    results.setdefault(name, {})[size] = time_calls(fn, args.iters)
                except Exception as e:
                    unavailable[name] = f"{type(e).__name__}: {e}"[:300]
        results.setdefault("torch nccl all_reduce", {})[size] = time_calls(lambda: dist.all_reduce(x), args.iters)
    if rank == 0:
        print(f"torch {torch.__version__}, NCCL {'.'.join(map(str, torch.cuda.nccl.version()))}, {world} x "
              f"{torch.cuda.get_device_name()}; median us per call, bf16")
        print("| impl | " + " | ".join(f"{s >> 10} KiB" for s in SIZES) + " |")
        print("|---|" + "---:|" * len(SIZES))
        for name, by in results.items():
            print(f"| {name} | " + " | ".join(f"{by[s]:.1f}" if s in by else "-" for s in SIZES) + " |")
        for name, why in unavailable.items():
            print(f"unavailable: {name}: {why}")
        if args.out:
            json.dump({"results": results, "unavailable": unavailable, "torch": torch.__version__}, open(args.out, "w"), indent=1)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    sys.exit(main())
