"""FP8 routed experts in PyTorch, one GPU: the shared reference's MoE decode step (../shared/reference/
torch_moe_fp8_ref.py: attention, top-k routing, only the touched experts read, CUDA graphs) with the expert
GEMMs in FP8 as vLLM's FP8-dynamic MoE runs them: tokens quantized per row (amax / 448), e4m3 weights with
one scale per expert channel, torch._scaled_grouped_mm over the routed rows; router, attention and LM head
bf16, the shared experts FP8 through torch._scaled_mm with the same scales. Random weights, real shapes.
Run it in the same lease as `peerplan validate --bench-steps --weights fp8`.
  python3 bench/moe/torch_fp8_moe_ref.py OUTDIR [REFDIR] [MODEL ...]
REFDIR holds torch_moe_fp8_ref.py (default ../shared/reference, else .gpu-ref)."""
import json, os, sys

args = sys.argv[1:]
outdir = args[0] if args else "."
refdir = args[1] if len(args) > 1 else next((d for d in ("../shared/reference", ".gpu-ref") if os.path.isdir(d)), ".")
sys.path.insert(0, refdir)
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
import torch_moe_fp8_ref as ref  # noqa: E402

dev = ref.dev
E4M3 = torch.float8_e4m3fn


def quant_rows(x):
    """Per-row dynamic e4m3 (vLLM's per-token FP8): codes and the float32 scale of each row."""
    s = (x.abs().amax(dim=-1, keepdim=True).float() / 448.0).clamp(min=1e-12)
    return (x.float() / s).clamp(-448, 448).to(E4M3), s


def fp8_weight(*shape):
    """e4m3 codes [.., n, k] of N(0, 0.02) weights and one scale per output channel n."""
    w = torch.randn(*shape, device=dev, dtype=torch.float32) * 0.02
    s = w.abs().amax(dim=-1, keepdim=True) / 448.0
    return (w / s).to(E4M3), s.squeeze(-1)


def linear_fp8(x, w, s):
    """y = x W^T with x quantized per row, W [n, k] e4m3 with channel scales s [n] (torch._scaled_mm)."""
    q, sx = quant_rows(x)
    return torch._scaled_mm(q, w.t(), scale_a=sx, scale_b=s.view(1, -1), out_dtype=torch.bfloat16)


def moe_mlp_fp8(x, w, m):
    B, T, h = x.shape
    y = F.rms_norm(x, (h,)).view(-1, h)
    n = y.shape[0]
    p, idx = torch.topk(torch.softmax((y @ w["router"].t()).float(), -1), m["k"], dim=-1)
    flat = idx.reshape(-1)
    order = torch.argsort(flat)
    counts = torch.zeros(m["E"], device=dev, dtype=torch.int32).scatter_add_(0, flat.int(), torch.ones_like(flat, dtype=torch.int32))
    offs = torch.cumsum(counts, 0, dtype=torch.int32)
    q, sq = quant_rows(y[order // m["k"]])
    # mat_b as [E, k, n] column-major: the [E, n, k] codes transposed; scales [E, n] per expert channel.
    gu = torch._scaled_grouped_mm(q, w["gu"].transpose(-2, -1), sq.view(-1), w["gu_s"], offs=offs, out_dtype=torch.bfloat16)
    g, u = gu.chunk(2, dim=-1)
    q2, sq2 = quant_rows((F.silu(g) * u).contiguous())
    d = torch._scaled_grouped_mm(q2, w["dn"].transpose(-2, -1), sq2.view(-1), w["dn_s"], offs=offs, out_dtype=torch.bfloat16)
    out = torch.zeros(n, h, device=dev, dtype=torch.float32)
    out.index_add_(0, order // m["k"], d.float() * p.reshape(-1)[order, None])
    if m["S"]:
        sg, su = linear_fp8(y, w["sgu"], w["sgu_s"]).chunk(2, dim=-1)
        out += linear_fp8((F.silu(sg) * su).contiguous(), w["sdn"], w["sdn_s"]).float() * torch.sigmoid(y @ w["sgate"].t()).float()
    return x + out.to(torch.bfloat16).view(B, T, h)


def case(name, m, out):
    hd = m["h"] // m["nh"]
    layers = []
    for _ in range(m["L"]):
        w = dict(qkv=ref.mk((m["nh"] + 2 * m["kv"]) * hd, m["h"]), o=ref.mk(m["h"], m["nh"] * hd), router=ref.mk(m["E"], m["h"]))
        w["gu"], w["gu_s"] = fp8_weight(m["E"], 2 * m["I"], m["h"])
        w["dn"], w["dn_s"] = fp8_weight(m["E"], m["h"], m["I"])
        if m["S"]:
            w["sgu"], w["sgu_s"] = fp8_weight(2 * m["S"], m["h"])
            w["sdn"], w["sdn_s"] = fp8_weight(m["h"], m["S"])
            w["sgate"] = ref.mk(1, m["h"])
        layers.append(w)
    head = ref.mk(m["V"], m["h"])
    res = {}
    for B in (1, 8, 32, 64):
        kc = [torch.randn(B, m["kv"], 1025, hd, device=dev, dtype=torch.bfloat16) for _ in layers]
        vc = [torch.randn(B, m["kv"], 1025, hd, device=dev, dtype=torch.bfloat16) for _ in layers]
        x0 = torch.randn(B, 1, m["h"], device=dev, dtype=torch.bfloat16)

        def f():
            x = x0
            for i, w in enumerate(layers):
                x = moe_mlp_fp8(ref.attn(x, w, kc[i], vc[i], 1024, m["nh"], m["kv"], hd), w, m)
            return F.rms_norm(x, (m["h"],)) @ head.t()
        r = {}
        try:
            r["eager"] = ref.timed(f)
            g = ref.graphed(f); r["graph"] = ref.timed(lambda: g.replay()); del g
        except Exception as ex:
            r["error"] = str(ex)[:400]
        res[f"decode_b{B}_ctx1024"] = r
        del kc, vc; torch.cuda.empty_cache()
        if "error" in r: break
    out[name] = res
    print(name, "fp8 experts", json.dumps({k: (round(v["graph"]["median_ms"], 3) if "graph" in v else v.get("error")) for k, v in res.items()}), flush=True)


def main():
    names = args[2:] or ["qwen1.5-moe-a2.7b"]
    out = {"torch": torch.__version__, "gpu": torch.cuda.get_device_name(0), "scaled_grouped_mm": hasattr(torch, "_scaled_grouped_mm")}
    for name in names:
        try: case(name, ref.MOE[name], out)
        except Exception as ex: out[name] = dict(error=str(ex)[:400]); print(name, "error", str(ex)[:400], flush=True)
        torch.cuda.empty_cache()
        json.dump(out, open(os.path.join(outdir, "torch_fp8_moe_ref.json"), "w"), indent=1)


if __name__ == "__main__":
    main()
