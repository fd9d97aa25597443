"""Reference for issue 15, one GPU: a whole FP8 decode step (attention included) of a Llama-shaped model in
PyTorch, as an engine without kernel fusion runs it: every linear layer's weights are e4m3 with a per-tensor scale,
its input is quantized to e4m3 with a static per-tensor scale (a kernel of its own, as vLLM's scaled_fp8_quant when its
fusion passes are off) and multiplied by torch._scaled_mm; norms, rotary-free attention (SDPA over a bf16 KV cache),
residuals and the bf16 LM head as ../shared/reference/torch_ref.py. Random weights, real shapes, CUDA graphs, context
1024. The shared torch_moe_fp8_ref.py times only the GEMM stack with x already quantized; this adds what a step
also runs, so the executor's `validate --bench-steps --weights fp8` compares with a whole step.
Run on the GPU host: python3 bench/quant/torch_fp8_step_ref.py OUTDIR [model ...]"""
import json, os, sys, time
import torch
import torch.nn.functional as F

MODELS = {
    "llama-3.1-8b": dict(h=4096, L=32, nh=32, kv=8, I=14336, V=128256),
    "llama-3.1-70b": dict(h=8192, L=80, nh=64, kv=8, I=28672, V=128256),
}
dev = torch.device("cuda", 0)
F8 = torch.float8_e4m3fn
ONE = torch.ones((), device=dev, dtype=torch.float32)


def fp8_weight(n, k):
    # Codes spread over e4m3's range; the per-tensor scale brings the weights near 0.02, as a checkpoint's.
    w = (torch.randn(n, k, device=dev) * 64).clamp(-448, 448).to(F8)
    return w, torch.full((), 0.02 / 64, device=dev, dtype=torch.float32)


def linear(x, w, ws, xs):
    x2 = x.reshape(-1, x.shape[-1])
    xq = (x2 / xs).clamp(-448, 448).to(F8)  # the separate input-quantize kernel
    y = torch._scaled_mm(xq, w.t(), scale_a=xs, scale_b=ws, out_dtype=torch.bfloat16)
    return y.view(*x.shape[:-1], w.shape[0])


def build(m):
    h, nh, kv, I = m["h"], m["nh"], m["kv"], m["I"]
    hd = h // nh
    layers = []
    for _ in range(m["L"]):
        layers.append(dict(qkv=fp8_weight((nh + 2 * kv) * hd, h), o=fp8_weight(h, nh * hd), gu=fp8_weight(2 * I, h),
                           d=fp8_weight(h, I)))
    head = torch.randn(m["V"], h, device=dev, dtype=torch.bfloat16) * 0.02
    return layers, head, nh, kv, hd


def step(x, layers, head, nh, kv, hd, kc, vc, ctx, xs):
    B, T, h = x.shape
    for i, w in enumerate(layers):
        y = F.rms_norm(x, (h,))
        q, k, v = linear(y, *w["qkv"], xs).split([nh * hd, kv * hd, kv * hd], dim=-1)
        q = q.view(B, T, nh, hd).transpose(1, 2)
        kc[i][:, :, ctx:ctx + 1] = k.view(B, T, kv, hd).transpose(1, 2)
        vc[i][:, :, ctx:ctx + 1] = v.view(B, T, kv, hd).transpose(1, 2)
        a = F.scaled_dot_product_attention(q, kc[i][:, :, :ctx + 1], vc[i][:, :, :ctx + 1], enable_gqa=True)
        x = x + linear(a.transpose(1, 2).reshape(B, T, nh * hd), *w["o"], xs)
        y = F.rms_norm(x, (h,))
        g, u = linear(y, *w["gu"], xs).chunk(2, dim=-1)
        x = x + linear(F.silu(g) * u, *w["d"], xs)
    return F.rms_norm(x[:, -1:], (h,)) @ head.t()


def timed(fn, n=30, warm=3):
    for _ in range(warm): fn()
    torch.cuda.synchronize()
    ts = []
    for _ in range(n):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record(); fn(); e.record(); e.synchronize(); ts.append(s.elapsed_time(e))
    ts.sort()
    return dict(median_ms=ts[len(ts) // 2], min_ms=ts[0], max_ms=ts[-1])


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "."
    names = sys.argv[2:] or list(MODELS)
    res = {"torch": torch.__version__, "gpu": torch.cuda.get_device_name(0), "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    ctx = 1024
    xs = torch.full((), 1.0 / 64, device=dev, dtype=torch.float32)
    for name in names:
        m = MODELS[name]
        layers, head, nh, kv, hd = build(m)
        r = {}
        for B in (1, 8, 32, 64):
            kc = [torch.randn(B, kv, ctx + 1, hd, device=dev, dtype=torch.bfloat16) for _ in layers]
            vc = [torch.randn(B, kv, ctx + 1, hd, device=dev, dtype=torch.bfloat16) for _ in layers]
            x = torch.randn(B, 1, m["h"], device=dev, dtype=torch.bfloat16)
            f = lambda: step(x, layers, head, nh, kv, hd, kc, vc, ctx, xs)
            s = torch.cuda.Stream(); s.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(s):
                for _ in range(2): f()
            torch.cuda.current_stream().wait_stream(s)
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g): f()
            r[f"decode_b{B}_ctx{ctx}"] = dict(graph=timed(lambda: g.replay()))
            del g, kc, vc
            torch.cuda.empty_cache()
        res[name + "_fp8"] = r
        print(name, "fp8 decode graph ms:", {k: round(v["graph"]["median_ms"], 3) for k, v in r.items()}, flush=True)
        del layers, head
        torch.cuda.empty_cache()
        json.dump(res, open(os.path.join(out, "torch_fp8_step_ref.json"), "w"), indent=1)


if __name__ == "__main__":
    main()
