"""A W4A16 yardstick beside the executor: Llama-3.1-8B decode with every linear layer as PyTorch's int4 weight-only
GEMM (torch._weight_int4pack_mm: the "tinygemm" kernel gpt-fast and torchao's int4 weight-only path use; group 128,
bf16 scales and zeros), LM head bf16, as ../shared/reference/torch_ref.py's decoder otherwise (RMSNorm, SDPA over a
bf16 cache, CUDA graph). Random weights, real shapes. Prints the step time at batch 1 / 2 and the GEMMs alone, each
against the packed bytes over a measured streaming-read rate, so peerplan's W4A16 ratio (issue 15: 1.3x asked) has a
public kernel's figure beside it from the same lease. Run from the repository root (it imports the shared reference
from ../shared/reference or .gpu-ref): python3 scripts/gpu/torch_w4a16_ref.py OUTDIR"""
import json, os, sys, time

# The shared reference's timing helpers (CUDA events over graph replays), as bench/moe/torch_fp8_moe_ref.py uses them.
refdir = next((d for d in ("../shared/reference", ".gpu-ref") if os.path.isdir(d)), ".")
sys.path.insert(0, refdir)
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch_moe_fp8_ref import dev, graphed, timed  # noqa: E402

H, L, NH, KV, I, V, G = 4096, 32, 32, 8, 14336, 128256, 128
HD = H // NH


def int4_linear(n, k, tiles=8):
    """Random 4-bit weights [n, k] packed for tinygemm, with bf16 (scale, zero) per group of G along k."""
    q = torch.randint(0, 256, (n, k // 2), dtype=torch.uint8, device=dev)
    w = torch._convert_weight_to_int4pack(q, tiles)
    sz = torch.empty(k // G, n, 2, dtype=torch.bfloat16, device=dev)
    sz[..., 0].uniform_(0.001, 0.01); sz[..., 1].uniform_(-0.05, 0.05)
    return dict(w=w, sz=sz, n=n, bytes=n * k // 2 + sz.numel() * 2)


def mm(x, lin):  # x [m, k] bf16
    return torch._weight_int4pack_mm(x, lin["w"], G, lin["sz"])


def stream_read_gbps():
    """A sum over 4 GiB of fp32: the bytes read over its time (the streaming-read rate the floor divides by)."""
    a = torch.rand(1 << 30, device=dev)
    t = timed(lambda: a.sum(), n=10)["median_ms"]
    return a.numel() * 4 / t / 1e6


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "."
    res = {"torch": torch.__version__, "gpu": torch.cuda.get_device_name(0), "date": time.strftime("%Y-%m-%d"),
           "kernel": "torch._weight_int4pack_mm (tinygemm), group 128, innerKTiles 8; LM head bf16"}
    layers = [dict(qkv=int4_linear((NH + 2 * KV) * HD, H), o=int4_linear(H, NH * HD), gu=int4_linear(2 * I, H),
                   d=int4_linear(H, I)) for _ in range(L)]
    head = torch.randn(V, H, device=dev, dtype=torch.bfloat16) * 0.02
    packed = sum(l[k]["bytes"] for l in layers for k in l) + head.numel() * 2
    res["packed_gb"] = packed / 1e9
    res["read_gbps"] = stream_read_gbps()
    floor_ms = packed / (res["read_gbps"] * 1e6)
    res["floor_ms"] = floor_ms
    ctx = 1024
    for B in (1, 2):
        x = torch.randn(B, H, device=dev, dtype=torch.bfloat16) * 0.1
        xi = torch.randn(B, I, device=dev, dtype=torch.bfloat16) * 0.1
        kc = [torch.randn(B, KV, ctx + 1, HD, device=dev, dtype=torch.bfloat16) for _ in range(L)]
        vc = [torch.randn(B, KV, ctx + 1, HD, device=dev, dtype=torch.bfloat16) for _ in range(L)]

        def step():
            h = x
            for i, w in enumerate(layers):
                y = F.rms_norm(h, (H,))
                q, k, v = mm(y, w["qkv"]).split([NH * HD, KV * HD, KV * HD], dim=-1)
                q = q.view(B, NH, 1, HD)
                kc[i][:, :, ctx:ctx + 1] = k.view(B, KV, 1, HD); vc[i][:, :, ctx:ctx + 1] = v.view(B, KV, 1, HD)
                a = F.scaled_dot_product_attention(q, kc[i], vc[i], enable_gqa=True)
                h = h + mm(a.reshape(B, NH * HD), w["o"])
                g, u = mm(F.rms_norm(h, (H,)), w["gu"]).chunk(2, dim=-1)
                h = h + mm(F.silu(g) * u, w["d"])
            return F.rms_norm(h, (H,)) @ head.t()

        def gemms():
            for w in layers:
                mm(x, w["qkv"]); mm(x, w["o"]); mm(x, w["gu"]); mm(xi, w["d"])
            return x @ head.t()

        r = {}
        for name, f in (("step", step), ("gemms", gemms)):
            try:
                g = graphed(f)
                t = timed(lambda: g.replay())
                t["x_floor"] = t["median_ms"] / floor_ms
                r[name] = t
                del g
            except Exception as ex:  # report, never hide: the kernel may be missing on this build or GPU
                r[name + "_error"] = f"{type(ex).__name__}: {str(ex)[:300]}"
        res[f"decode_b{B}_ctx{ctx}"] = r
        print(f"b={B}", json.dumps(r), flush=True)
        del kc, vc
        torch.cuda.empty_cache()
    print(f"packed {res['packed_gb']:.3f} GB, read {res['read_gbps']:.0f} GB/s, floor {floor_ms:.3f} ms", flush=True)
    json.dump(res, open(os.path.join(out, "torch_w4a16_ref.json"), "w"), indent=1)


if __name__ == "__main__":
    main()
