// Self-test cases of issue 15's kernels against CPU fp64 references: the FP8 (per-tensor,
// per-channel, 128x128 block), INT8 and W4A16 GEMMs through gpu::QuantGemmRunner, and attention
// over an FP8 e4m3 KV cache (decode, prefill) plus the rotary kernel's FP8 cache write. The
// references dequantize the very codes and scales the GPU used (downloaded), and quantize x the
// way the kernels do (same float operations, e4m3 by cuda_fp8.h's host conversion), so the error
// left is the accumulation order and the bf16 output: tolerance 1e-2 as every other case.
#include <cuda_fp8.h>

#include <algorithm>
#include <cmath>
#include <exception>

#include <fmt/format.h>

#include "profiler/exec/self_test_util.hpp"
#include "profiler/gpu/cuda_check.hpp"
#include "profiler/gpu/gemm_quant.hpp"
#include "profiler/kernels/attention.hpp"
#include "profiler/kernels/dense_gemv.hpp"
#include "profiler/kernels/elementwise.hpp"
#include "profiler/kernels/w4a16.hpp"

namespace peerplan::exec::selftest {

namespace {

using bf16 = __nv_bfloat16;


template <class T>
std::vector<T> download(const gpu::DeviceBuffer& b, size_t n) {
  std::vector<T> h(n);
  CUDA_CHECK(cudaDeviceSynchronize());
  CUDA_CHECK(cudaMemcpy(h.data(), b.get(), n * sizeof(T), cudaMemcpyDeviceToHost));
  return h;
}
gpu::DeviceBuffer upload_bytes(int dev, const void* p, size_t n) {
  gpu::DeviceBuffer b(dev, std::max<size_t>(n, 16));
  CUDA_CHECK(cudaMemcpy(b.get(), p, n, cudaMemcpyHostToDevice));
  return b;
}

SelfTestResult failed(const std::string& kernel, const std::string& shape, const std::exception& e) {
  SelfTestResult r;
  r.kernel = kernel;
  r.shape = shape + " (error: " + e.what() + ")";
  r.tolerance = 1e-2;
  r.rel_error = INFINITY;
  return r;
}

// x quantized as the runner does, dequantized back: the values the GEMM multiplies.
std::vector<double> quantized_x(const std::vector<float>& x, int64_t M, int64_t n, int64_t k, DType dt,
                                gpu::Fp8Scaling sc, float x_scale) {
  std::vector<double> out(x.size());
  // W4A16's mma.sync variants and the int8 GEMV (W8A16, the runner's rule) multiply bf16 x.
  if ((dt == DType::INT4 && !kernels::w4a16_quantizes_x(M)) || (dt == DType::INT8 && kernels::dense_gemv_int8_supports(M, n, k))) {
    for (size_t i = 0; i < x.size(); ++i) out[i] = x[i];
    return out;
  }
  const bool fp8 = dt == DType::FP8_E4M3;
  // v7 quantizes x to int8 per 128-k group (amax / 127), as block-scaled FP8 does per 128.
  const int64_t group = (fp8 && sc == gpu::Fp8Scaling::Block128) || dt == DType::INT4 ? 128 : k;
  for (int64_t r = 0; r < M; ++r)
    for (int64_t g0 = 0; g0 < k; g0 += group) {
      float s = x_scale;
      if (!(fp8 && sc == gpu::Fp8Scaling::PerTensor)) {
        float amax = 0.f;
        for (int64_t c = g0; c < g0 + group; ++c) amax = std::max(amax, std::fabs(x[size_t(r * k + c)]));
        s = amax > 0.f ? amax / (fp8 ? 448.f : 127.f) : 1.f;
      }
      const float inv = 1.f / s;
      for (int64_t c = g0; c < g0 + group; ++c) {
        const float v = x[size_t(r * k + c)] * inv;
        const double q = fp8 ? e4m3_value(e4m3_code(v)) : std::nearbyint(std::min(std::max(v, -127.f), 127.f));
        out[size_t(r * k + c)] = q * double(s);
      }
    }
  return out;
}

// W dequantized from the runner's codes and scales (block scales in the order w_kmajor says).
std::vector<double> dequantized_w(const gpu::QuantWeight& w, bool w_kmajor) {
  const int64_t n = w.n, k = w.k;
  std::vector<double> W(size_t(n * k));
  if (w.dtype == DType::INT4) {
    auto codes = download<uint32_t>(w.codes, size_t(n * k / 8));
    auto sc = download<bf16>(w.scales, size_t(n * k / 128));
    for (int64_t r = 0; r < n; ++r)
      for (int64_t c = 0; c < k; ++c) {
        const int64_t word = kernels::w4_word_index(kernels::w4a16_layout(), r, c / 8, k);
        const int q = int(codes[size_t(word)] >> (4 * (c % 8))) & 15;
        W[size_t(r * k + c)] = (q - 8) * double(__bfloat162float(sc[size_t(r * (k / 128) + c / 128)]));
      }
    return W;
  }
  auto codes = download<uint8_t>(w.codes, size_t(n * k));
  const int64_t nb = (n + 127) / 128;
  const size_t ns = w.dtype == DType::INT8 || w.scaling == gpu::Fp8Scaling::PerChannel ? size_t(n)
                    : w.scaling == gpu::Fp8Scaling::PerTensor                           ? 1
                                                                                        : size_t(gpu::fp8_block_scale_count(n, k));
  auto sc = download<float>(w.scales, ns);
  for (int64_t r = 0; r < n; ++r)
    for (int64_t c = 0; c < k; ++c) {
      const uint8_t b = codes[size_t(r * k + c)];
      const double v = w.dtype == DType::INT8 ? double(int8_t(b)) : e4m3_value(b);
      double s = sc[0];
      if (w.dtype == DType::INT8 || w.scaling == gpu::Fp8Scaling::PerChannel) s = sc[size_t(r)];
      else if (w.scaling == gpu::Fp8Scaling::Block128)
        s = w_kmajor ? sc[size_t((r / 128) * gpu::fp8_block_scale_ld(k) + c / 128)] : sc[size_t((c / 128) * nb + r / 128)];
      W[size_t(r * k + c)] = v * s;
    }
  return W;
}

// layout: -1 the runner's block-scale order; 0..3 (w_kmajor << 1 | x_kmajor) a probe's.
// runs > 1: the GEMM runs that many times into the same output (split-K counters must re-arm).
SelfTestResult gemm_case(int dev, std::mt19937_64& rng, DType dt, gpu::Fp8Scaling sc, int64_t M, int64_t n,
                         int64_t k, int layout = -1, int runs = 1) {
  const std::string kernel = std::string("gemm_") + dtype_name(dt) +
                             (dt == DType::FP8_E4M3 ? std::string("_") + gpu::to_string(sc) : std::string());
  const std::string shape = fmt::format("M={} n={} k={}", M, n, k);
  try {
    std::uniform_real_distribution<float> u(-1.f, 1.f);
    std::vector<float> xf(size_t(M * k));
    std::vector<bf16> xb(xf.size());
    for (size_t i = 0; i < xf.size(); ++i) {
      xb[i] = __float2bfloat16(u(rng));
      xf[i] = __bfloat162float(xb[i]);
    }
    gpu::QuantWeight w = gpu::make_random_quant_weight(dev, dt, sc, n, k, rng(), nullptr);
    float x_scale = 1.f;
    if (w.x_scale.get()) x_scale = download<float>(w.x_scale, 1)[0];
    gpu::QuantGemmRunner runner(dev);
    if (layout >= 0) runner.set_block_scale_layout(layout & 2, layout & 1);
    const std::vector<double> X = quantized_x(xf, M, n, k, dt, sc, x_scale), W = dequantized_w(w, runner.block_w_kmajor());
    std::vector<double> ref(size_t(M * n));
    for (int64_t r = 0; r < M; ++r)
      for (int64_t c = 0; c < n; ++c) {
        double acc = 0;
        for (int64_t j = 0; j < k; ++j) acc += X[size_t(r * k + j)] * W[size_t(c * k + j)];
        ref[size_t(r * n + c)] = acc;
      }
    auto dx = upload(dev, xb);
    auto dy = poisoned(dev, size_t(M * n));
    if (dt == DType::INT4) runner.set_int4_gemv_max_m(kernels::kW4GemvMaxM);  // the GEMV kernel up to M = 64
    for (int r = 0; r < runs; ++r) {
      if (r > 0) CUDA_CHECK(cudaMemset(dy.get(), 0xff, size_t(M * n) * 2));  // poisoned again: every run writes all
      runner.run(dx.get(), w, dy.get(), M, nullptr);
    }
    return compare(kernel, shape, dy, ref);
  } catch (const std::exception& e) {
    return failed(kernel, shape, e);
  }
}

// A random e4m3 KV cache (every finite code, subnormals included) and its values.
struct Fp8Cache {
  std::vector<uint8_t> codes;
  std::vector<double> values;
};
Fp8Cache random_fp8_cache(size_t n, double scale, std::mt19937_64& rng) {
  Fp8Cache c;
  c.codes.resize(n);
  c.values.resize(n);
  for (size_t i = 0; i < n; ++i) {
    uint8_t b = uint8_t(rng() & 0xff);
    if ((b & 0x7f) == 0x7f) b ^= 1;  // never NaN
    c.codes[i] = b;
    c.values[i] = e4m3_value(b) * scale;
  }
  return c;
}
std::vector<bf16> random_bf16(size_t n, std::mt19937_64& rng, std::vector<double>& as_double) {
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::vector<bf16> v(n);
  as_double.resize(n);
  for (size_t i = 0; i < n; ++i) {
    v[i] = __float2bfloat16(u(rng));
    as_double[i] = __bfloat162float(v[i]);
  }
  return v;
}

constexpr float kKScale = 1.f / 300, kVScale = 1.f / 200;

SelfTestResult decode_fp8_case(int dev, int sms, std::mt19937_64& rng, int D, int kvh, int group, int max_ctx,
                               const std::vector<int>& lens, const std::vector<int>& slot_of, int slots) {
  const int heads = kvh * group, batch = int(lens.size());
  const size_t cache = size_t(slots) * kvh * max_ctx * D;
  Fp8Cache K = random_fp8_cache(cache, kKScale, rng), V = random_fp8_cache(cache, kVScale, rng);
  const int64_t qstride = (heads + 2 * kvh) * D;
  std::vector<double> Qd;
  auto Q = random_bf16(size_t(batch * qstride), rng, Qd);
  auto dk = upload_bytes(dev, K.codes.data(), cache), dv = upload_bytes(dev, V.codes.data(), cache);
  auto dq = upload(dev, Q);
  auto dl = upload_int(dev, lens), ds = upload_int(dev, slot_of);
  auto dout = poisoned(dev, size_t(batch) * heads * D);
  gpu::DeviceBuffer ws(dev, std::max<size_t>(256, kernels::decode_attention_workspace_bytes(batch, heads, D, max_ctx, kvh, sms)));
  kernels::DecodeAttention a;
  a.q = dq.as<bf16>();
  a.q_row_stride = qstride;
  a.k_cache_fp8 = dk.as<uint8_t>();
  a.v_cache_fp8 = dv.as<uint8_t>();
  a.k_scale = kKScale;
  a.v_scale = kVScale;
  a.slots = slot_of.empty() ? nullptr : ds.as<int>();
  a.seq_lens = dl.as<int>();
  a.out = dout.as<bf16>();
  a.workspace = ws.as<float>();
  a.batch = batch, a.heads = heads, a.kv_heads = kvh, a.head_dim = D, a.max_ctx = max_ctx;
  kernels::decode_attention(a, sms, nullptr);
  std::vector<double> ref(size_t(batch) * heads * D);
  for (int b = 0; b < batch; ++b)
    for (int h = 0; h < heads; ++h) {
      const int slot = slot_of.empty() ? b : slot_of[size_t(b)];
      const int64_t base = (int64_t(slot) * kvh + h / group) * max_ctx * D;
      ref_attend(&Qd[size_t(b * qstride + h * D)], K.values, V.values, base, lens[size_t(b)], D,
                 1.0 / std::sqrt(double(D)), &ref[size_t((b * heads + h) * D)]);
    }
  return compare("decode_attention_fp8kv", fmt::format("b={} heads={} kv={} D={} cap={}", batch, heads, kvh, D, max_ctx),
                 dout, ref);
}

SelfTestResult prefill_fp8_case(int dev, std::mt19937_64& rng, int D, int kvh, int group, int max_ctx,
                                const std::vector<int>& qlen, const std::vector<int>& ctx) {
  const int heads = kvh * group, nseq = int(qlen.size());
  const size_t cache = size_t(nseq) * kvh * max_ctx * D;
  Fp8Cache K = random_fp8_cache(cache, kKScale, rng), V = random_fp8_cache(cache, kVScale, rng);
  std::vector<int> qs{0};
  for (int q : qlen) qs.push_back(qs.back() + q);
  const int total = qs.back();
  const int64_t qstride = (heads + 2 * kvh) * D;
  std::vector<double> Qd;
  auto Q = random_bf16(size_t(total) * qstride, rng, Qd);
  auto dk = upload_bytes(dev, K.codes.data(), cache), dv = upload_bytes(dev, V.codes.data(), cache);
  auto dq = upload(dev, Q);
  auto dqs = upload_int(dev, qs), dl = upload_int(dev, ctx);
  auto dout = poisoned(dev, size_t(total) * heads * D);
  kernels::PrefillAttention a;
  a.q = dq.as<bf16>();
  a.q_row_stride = qstride;
  a.k_cache_fp8 = dk.as<uint8_t>();
  a.v_cache_fp8 = dv.as<uint8_t>();
  a.k_scale = kKScale;
  a.v_scale = kVScale;
  a.q_start = dqs.as<int>();
  a.seq_lens = dl.as<int>();
  a.out = dout.as<bf16>();
  a.num_seqs = nseq;
  a.max_q_len = *std::max_element(qlen.begin(), qlen.end());
  a.heads = heads, a.kv_heads = kvh, a.head_dim = D, a.max_ctx = max_ctx;
  kernels::prefill_attention(a, nullptr);
  std::vector<double> ref(size_t(total) * heads * D);
  for (int s = 0; s < nseq; ++s)
    for (int i = 0; i < qlen[size_t(s)]; ++i)
      for (int h = 0; h < heads; ++h) {
        const int row = qs[size_t(s)] + i;
        const int64_t base = (int64_t(s) * kvh + h / group) * max_ctx * D;
        ref_attend(&Qd[size_t(row * qstride + h * D)], K.values, V.values, base, ctx[size_t(s)] - qlen[size_t(s)] + i + 1,
                   D, 1.0 / std::sqrt(double(D)), &ref[size_t((int64_t(row) * heads + h) * D)]);
      }
  std::string ls;
  for (size_t s = 0; s < qlen.size(); ++s) ls += fmt::format("{}{}/{}", s ? "," : "", qlen[s], ctx[s]);
  return compare("prefill_attention_fp8kv", fmt::format("heads={} kv={} D={} q/ctx={}", heads, kvh, D, ls), dout, ref);
}

// The rotary kernel's FP8 cache write: every code the kernel wrote equals e4m3(value / scale) of
// the rotated K (read back from the QKV row it rotated in place) and of V.
SelfTestResult rotary_fp8_case(int dev, std::mt19937_64& rng) {
  const int heads = 8, kvh = 2, D = 128, max_ctx = 64, tokens = 5;
  const int64_t row = (heads + 2 * kvh) * D;
  std::vector<double> unused;
  auto qkv = random_bf16(size_t(tokens * row), rng, unused);
  const std::vector<int> pos{0, 1, 17, 63, 5}, slot{0, 0, 1, 1, 2};
  auto dqkv = upload(dev, qkv);
  auto dp = upload_int(dev, pos), ds = upload_int(dev, slot);
  const size_t cache = size_t(3) * kvh * max_ctx * D;
  gpu::DeviceBuffer kc(dev, cache), vc(dev, cache);
  CUDA_CHECK(cudaMemset(kc.get(), 0x7f, cache));  // NaN codes: an unwritten element fails
  CUDA_CHECK(cudaMemset(vc.get(), 0x7f, cache));
  kernels::RotaryCache r;
  r.qkv = dqkv.as<bf16>();
  r.positions = dp.as<int>();
  r.token_slot = ds.as<int>();
  r.k_cache_fp8 = kc.as<uint8_t>();
  r.v_cache_fp8 = vc.as<uint8_t>();
  r.k_scale = kKScale;
  r.v_scale = kVScale;
  r.tokens = tokens, r.heads = heads, r.kv_heads = kvh, r.head_dim = D, r.max_ctx = max_ctx;
  kernels::rotary_and_cache(r, nullptr);
  auto rotated = download<bf16>(dqkv, qkv.size());
  auto kh = download<uint8_t>(kc, cache), vh = download<uint8_t>(vc, cache);
  int64_t bad = 0, total = 0;
  for (int t = 0; t < tokens; ++t)
    for (int h = 0; h < kvh; ++h)
      for (int d = 0; d < D; ++d) {
        const size_t at = size_t(((int64_t(slot[size_t(t)]) * kvh + h) * max_ctx + pos[size_t(t)]) * D + d);
        const float kv = __bfloat162float(rotated[size_t(t * row + (heads + h) * D + d)]);
        const float vv = __bfloat162float(qkv[size_t(t * row + (heads + kvh + h) * D + d)]);
        bad += kh[at] != e4m3_code(kv * (1.f / kKScale));
        bad += vh[at] != e4m3_code(vv * (1.f / kVScale));
        total += 2;
      }
  SelfTestResult res;
  res.kernel = "rotary_and_cache_fp8kv";
  res.shape = fmt::format("tokens={} kv={} D={} (codes differing: {} of {})", tokens, kvh, D, bad, total);
  res.tolerance = 1e-3;  // fraction of codes that differ
  res.rel_error = double(bad) / double(total);
  res.all_written = true;
  return res;
}

}  // namespace

void fp8_block_layout_probe(std::vector<SelfTestResult>& out, int dev, std::mt19937_64& rng) {
  for (int layout = 0; layout < 4; ++layout) {
    SelfTestResult r = gemm_case(dev, rng, DType::FP8_E4M3, gpu::Fp8Scaling::Block128, 8, 512, 512, layout);
    r.kernel = std::string("probe_fp8_block_w_") + (layout & 2 ? "kmajor" : "outer") + "_x_" +
               (layout & 1 ? "kmajor" : "outer");
    out.push_back(r);
  }
}

void quant_cases(std::vector<SelfTestResult>& out, int dev, int sms, std::mt19937_64& rng) {
  using S = gpu::Fp8Scaling;
  out.push_back(gemm_case(dev, rng, DType::FP8_E4M3, S::PerTensor, 1, 256, 512));
  out.push_back(gemm_case(dev, rng, DType::FP8_E4M3, S::PerTensor, 37, 192, 256));
  out.push_back(gemm_case(dev, rng, DType::FP8_E4M3, S::PerChannel, 5, 256, 512));
  // Block scales: n / 128 and M multiples of 4 (16-byte scale rows, as every real model's n).
  out.push_back(gemm_case(dev, rng, DType::FP8_E4M3, S::Block128, 8, 512, 512));
  out.push_back(gemm_case(dev, rng, DType::FP8_E4M3, S::Block128, 20, 512, 384));
  // A failing block case says which of the four scale orders cuBLASLt reads, in the same output.
  if (!out[out.size() - 1].pass() || !out[out.size() - 2].pass()) fp8_block_layout_probe(out, dev, rng);
  // int8: the W8A16 GEMV at M <= 2 (a partial 512-k step; k of one step shared by four warps, three without
  // one; int8 weights need n and k multiples of 16), the W8A8 path (quantize, IMMA, dequantize) above.
  out.push_back(gemm_case(dev, rng, DType::INT8, S::PerTensor, 1, 256, 512));
  out.push_back(gemm_case(dev, rng, DType::INT8, S::PerTensor, 1, 272, 4112));
  out.push_back(gemm_case(dev, rng, DType::INT8, S::PerTensor, 2, 272, 4112));
  out.push_back(gemm_case(dev, rng, DType::INT8, S::PerTensor, 1, 144, 48));
  out.push_back(gemm_case(dev, rng, DType::INT8, S::PerTensor, 2, 144, 48));
  out.push_back(gemm_case(dev, rng, DType::INT8, S::PerTensor, 3, 128, 256));
  out.push_back(gemm_case(dev, rng, DType::INT8, S::PerTensor, 33, 128, 256));
  out.push_back(gemm_case(dev, rng, DType::INT4, S::PerTensor, 1, 256, 1024));   // split-K
  out.push_back(gemm_case(dev, rng, DType::INT4, S::PerTensor, 16, 4096, 256));  // no split
  out.push_back(gemm_case(dev, rng, DType::INT4, S::PerTensor, 27, 136, 512));   // 2 m-tiles, partial column group
  out.push_back(gemm_case(dev, rng, DType::INT4, S::PerTensor, 61, 264, 384));   // 4 m-tiles
  out.push_back(gemm_case(dev, rng, DType::INT4, S::PerTensor, 100, 264, 384));  // dequantise + cuBLASLt
  // Every W4A16 GEMV variant (PEERPLAN_W4A16, kernels::w4a16_set_variant), each case run twice
  // into the same output: split-K across blocks with a partial column group and the k of the
  // 8B / 70B down projections, no split at M = 1, a column group of 8 past n, warps with no chunk
  // (3 chunks over 4 or 8 warps), 1, 2 and 4 m-tiles; in both word orders (kernels::W4Layout).
  {
    const int v0 = kernels::w4a16_variant();
    const kernels::W4Layout l0 = kernels::w4a16_layout();
    for (kernels::W4Layout l : {kernels::W4Layout::Tiled, kernels::W4Layout::Gptq})
    for (int v = 1; v <= kernels::kW4Variants; ++v) {
      kernels::w4a16_set_variant(v);
      kernels::w4a16_set_layout(l);
      auto add = [&](int64_t M, int64_t n, int64_t k) {
        SelfTestResult r = gemm_case(dev, rng, DType::INT4, S::PerTensor, M, n, k, -1, 2);
        r.kernel += "_v" + std::to_string(v) + "_" + kernels::w4a16_layout_name(l);
        out.push_back(r);
      };
      add(1, 264, 14336);
      add(3, 136, 28672);
      add(1, 4096, 1024);
      add(2, 2048, 4096);
      add(8, 1000, 4096);
      add(16, 4096, 512);
      add(27, 136, 512);
      add(61, 264, 384);
      add(2, 136, 1024);  // M = 2 (v7: 16-row groups) with a partial one
      if (v == kernels::kW4Variants) add(100, 264, 384);  // dequantise + cuBLASLt reads the same order
    }
    kernels::w4a16_set_variant(v0);
    kernels::w4a16_set_layout(l0);
  }
  auto guarded = [&](const std::string& kernel, auto&& f) {
    try {
      out.push_back(f());
    } catch (const std::exception& e) {
      out.push_back(failed(kernel, "", e));
    }
  };
  guarded("decode_attention_fp8kv",
          [&] { return decode_fp8_case(dev, sms, rng, 128, 2, 4, 700, {1, 300, 700}, {1, 0, 2}, 3); });
  guarded("decode_attention_fp8kv",
          [&] { return decode_fp8_case(dev, sms, rng, 128, 4, 4, 700, {700, 1, 333, 64}, {3, 1, 0, 2}, 4); });
  guarded("decode_attention_fp8kv", [&] { return decode_fp8_case(dev, sms, rng, 64, 8, 1, 200, {200, 17}, {}, 2); });
  guarded("prefill_attention_fp8kv",
          [&] { return prefill_fp8_case(dev, rng, 128, 2, 2, 320, {100, 37}, {100, 300}); });
  guarded("prefill_attention_fp8kv", [&] { return prefill_fp8_case(dev, rng, 64, 1, 2, 1100, {1030}, {1030}); });
  guarded("rotary_and_cache_fp8kv", [&] { return rotary_fp8_case(dev, rng); });
}

void wide_head_fp8_decode_cases(std::vector<SelfTestResult>& out, int dev, int sms, std::mt19937_64& rng) {
  auto dec = [&](int D, int kvh, int group, int max_ctx, std::vector<int> lens, std::vector<int> slot_of, int slots) {
    try {
      out.push_back(decode_fp8_case(dev, sms, rng, D, kvh, group, max_ctx, lens, slot_of, slots));
    } catch (const std::exception& e) {
      out.push_back(failed("decode_attention_fp8kv", fmt::format("D={} kv={} G={}", D, kvh, group), e));
    }
  };
  dec(256, 1, 8, 2000, {2000}, {}, 1);                           // batch 1: 63 chunks of 32 tokens (capped by the quantum)
  dec(256, 2, 16, 1000, {999, 1, 700, 1000}, {3, 1, 0, 2}, 4);   // group split, cluster-merged splits (8)
  dec(256, 2, 16, 3000, {3000, 1, 1700, 2999}, {3, 1, 0, 2}, 4); // the same past 1024: 16 splits, merge kernel
  dec(256, 4, 4, 2800, {2800, 2700, 1, 100, 2799, 33, 64, 2000}, {}, 8);  // 11 x 32-token chunks, merge kernel
  dec(192, 2, 8, 1500, {1, 333, 1500}, {2, 0, 3}, 4);            // general dims (192 of 256)
  dec(192, 1, 12, 900, {900, 65}, {1, 0}, 2);                    // general dims and group (8 + 4)
}

}  // namespace peerplan::exec::selftest
