// GPU self-test of the routed-MoE kernels (issue 14) against CPU references: the routing (expert
// choice of route_token, renormalised softmax weights, per-expert offsets, a sorted-row permutation
// consistent with them, tile lists covering every row once), each grouped-GEMM kernel (16/32-row
// stream tiles and 64-row tiled, with and without the token gather, n off the 16-row and 128-row
// tiles, k off the unrolled chunk), the executor's dispatch forced onto cuBLASLt per expert (the
// offsets read back, gate_up's rows gathered; skewed routings with empty experts), the same over FP8
// experts (moe_gemm_fp8.cu; cuBLASLt FP8 per expert), int8 experts (the same kernels with int8 codes;
// cuBLASLt int8 per expert), int4 experts (moe_gemm_int4.cu; dequantize + cuBLASLt per expert), MXFP4
// experts (moe_gemm_mxfp4.cu; the same) and the weighted combine. Outputs are poisoned first.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <cuda_bf16.h>

#include <fmt/format.h>

#include "planner/model/routing.hpp"
#include "profiler/common/mxfp4_expert_layout.hpp"
#include "profiler/common/w4_expert_layout.hpp"
#include "profiler/exec/self_test_util.hpp"
#include "profiler/gpu/cuda_check.hpp"
#include "profiler/gpu/gemm.hpp"
#include "profiler/gpu/gemm_quant.hpp"
#include "profiler/gpu/raii.hpp"
#include "profiler/kernels/elementwise.hpp"
#include "profiler/kernels/moe_expert_gemm.hpp"
#include "profiler/kernels/moe_gemm.hpp"
#include "profiler/kernels/moe_route.hpp"

namespace peerplan::exec::selftest {

namespace {

using bf16 = __nv_bfloat16;
namespace kn = peerplan::kernels;

template <class T>
std::vector<T> download(const T* p, size_t n) {
  CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<T> h(n);
  if (n) CUDA_CHECK(cudaMemcpy(h.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost));
  return h;
}

gpu::DeviceBuffer upload_floats(int dev, const std::vector<float>& v) {
  gpu::DeviceBuffer b(dev, std::max<size_t>(16, v.size() * 4));
  CUDA_CHECK(cudaMemcpy(b.get(), v.data(), v.size() * 4, cudaMemcpyHostToDevice));
  return b;
}

std::vector<bf16> random_bf16(size_t n, std::mt19937_64& rng, double scale) { return selftest::random_bf16(n, rng, -scale, scale); }

SelfTestResult result(const std::string& kernel, const std::string& shape, double num, double den, bool written,
                      double tol) {
  SelfTestResult r;
  r.kernel = kernel;
  r.shape = shape;
  r.tolerance = tol;
  r.all_written = written;
  r.rel_error = written ? (den > 0 ? std::sqrt(num / den) : std::sqrt(num)) : INFINITY;
  return r;
}

// One routing on the device, kept for the GEMM and combine cases.
struct Routed {
  gpu::DeviceBuffer buf, logits, cdf;
  kn::MoeRouting r;
  int64_t tokens = 0;
  int experts = 0, topk = 0, first = 0, count = 0;
  int path = -1;  // -1: moe_route's choice, 0: one CTA, 1: grid
  std::vector<bf16> lg;
  std::vector<float> cdf_host;
};

kn::MoeRouteArgs route_args(const Routed& x, int layer) {
  kn::MoeRouteArgs a;
  a.logits = x.logits.as<bf16>();
  a.tokens = x.tokens, a.experts = x.experts, a.topk = x.topk, a.expert_first = x.first, a.expert_count = x.count;
  a.seed = 1234567, a.layer = layer;
  a.cdf = x.cdf_host.empty() ? nullptr : x.cdf.as<float>();
  return a;
}

Routed route(int dev, std::mt19937_64& rng, int64_t T, int E, int k, int first, int count, std::vector<float> cdf,
             int layer, int path = -1) {
  Routed x;
  x.tokens = T, x.experts = E, x.topk = k, x.first = first, x.count = count, x.path = path;
  x.lg = random_bf16(size_t(T * E), rng, 3.0);
  x.logits = upload(dev, x.lg);
  x.cdf_host = std::move(cdf);
  if (!x.cdf_host.empty()) x.cdf = upload_floats(dev, x.cdf_host);
  x.buf = gpu::DeviceBuffer(dev, size_t(kn::moe_route_buffer_ints(T, k, count)) * 4);
  CUDA_CHECK(cudaMemset(x.buf.get(), 0xff, x.buf.bytes()));  // poison: -1 / NaN everywhere
  x.r = kn::moe_routing_view(x.buf.as<int>(), T, k, count);
  const kn::MoeRouteArgs a = route_args(x, layer);
  if (path < 0) kn::moe_route(a, x.r, nullptr);
  else kn::moe_route_path(a, x.r, path == 1, nullptr);
  return x;
}

// Both routing paths timed on one shape (CUDA events, 20 launches each after a warm-up), printed
// beside the self-test's progress: the grid path exists because the one-CTA kernel serialised
// prefill-sized batches.
void time_route_paths(int dev, const Routed& x) {
  const kn::MoeRouteArgs a = route_args(x, 0);
  gpu::Event t0(dev), t1(dev);
  double us[2];
  for (int grid = 0; grid < 2; ++grid) {
    kn::moe_route_path(a, x.r, grid == 1, nullptr);
    t0.record(nullptr);
    for (int i = 0; i < 20; ++i) kn::moe_route_path(a, x.r, grid == 1, nullptr);
    t1.record(nullptr);
    t1.synchronize();
    us[grid] = t1.seconds_since(t0) * 1e6 / 20;
  }
  std::fprintf(stderr, "self-test: moe_route T=%lld E=%d k=%d local %d: one CTA %.1f us, grid %.1f us\n",
               static_cast<long long>(x.tokens), x.experts, x.topk, x.count, us[0], us[1]);
}

// Routing against the CPU: weights (fp64 softmax renormalised), offsets (counts of route_token's
// experts), the sorted rows (each local (token, j) in its expert's range, token_of_row inverse of
// row_of, every row used once) and the tile lists (each row in exactly one tile of each height).
void check_route(std::vector<SelfTestResult>& out, const Routed& x) {
  const int64_t T = x.tokens;
  const int k = x.topk;
  const auto w = download(x.r.weights, size_t(T * k));
  const auto row_of = download(x.r.row_of, size_t(T * k));
  const auto tor = download(x.r.token_of_row, size_t(T * k));
  const auto off = download(x.r.offsets, size_t(x.count + 1));
  const auto nt = download(x.r.num_tiles, size_t(kn::kMoeTileKinds));
  const bool grid = x.path < 0 ? T > kn::kMoeOneCtaMaxTokens : x.path == 1;
  const std::string shape = fmt::format("T={} E={} k={} local [{},+{}){} {}", T, x.experts, k, x.first, x.count,
                                        x.cdf_host.empty() ? "" : " skewed", grid ? "grid" : "one-cta");
  std::vector<int> count(size_t(x.count), 0);
  double num = 0, den = 0;
  int bad = 0;
  bool written = true;
  std::vector<int> used(size_t(T * k), 0);
  for (int64_t t = 0; t < T; ++t) {
    int ids[kn::kMoeMaxTopK];
    routing::route_token(1234567, 0, t, x.experts, k, x.cdf_host.empty() ? nullptr : x.cdf_host.data(), ids);
    double mx = -INFINITY, sum = 0, psum = 0;
    for (int e = 0; e < x.experts; ++e) mx = std::max(mx, bf16_value(x.lg[size_t(t * x.experts + e)]));
    for (int e = 0; e < x.experts; ++e) sum += std::exp(bf16_value(x.lg[size_t(t * x.experts + e)]) - mx);
    for (int j = 0; j < k; ++j) psum += std::exp(bf16_value(x.lg[size_t(t * x.experts + ids[j])]) - mx) / sum;
    for (int j = 0; j < k; ++j) {
      const double ref = std::exp(bf16_value(x.lg[size_t(t * x.experts + ids[j])]) - mx) / sum / psum;
      const double got = w[size_t(t * k + j)];
      if (std::isnan(got)) written = false;
      num += (got - ref) * (got - ref), den += ref * ref;
      const int le = ids[j] - x.first;
      const int row = row_of[size_t(t * k + j)];
      if (le < 0 || le >= x.count) {
        bad += row != -1;
        continue;
      }
      ++count[size_t(le)];
      if (row < 0 || row >= T * k) { ++bad; continue; }
      bad += used[size_t(row)]++ != 0;                             // each row once
      bad += tor[size_t(row)] != t;                                // its token
      bad += row < off[size_t(le)] || row >= off[size_t(le) + 1];  // in its expert's range
    }
  }
  int o = 0;
  for (int e = 0; e < x.count; ++e) {
    bad += off[size_t(e)] != o;
    o += count[size_t(e)];
  }
  bad += off[size_t(x.count)] != o;
  for (int s = 0; s < kn::kMoeTileKinds; ++s) {
    const int h = kn::moe_tile_rows(s);
    const auto tiles = download(x.r.tiles[s], size_t(std::max(0, nt[size_t(s)])));
    std::vector<int> cover(size_t(o), 0);
    bad += nt[size_t(s)] < 0 || nt[size_t(s)] > kn::moe_max_tiles(T * k, x.count, h);
    for (int p : tiles) {
      const int e = p >> 20, r0 = p & 0xFFFFF;
      if (e >= x.count) { ++bad; continue; }
      for (int r = r0; r < std::min(r0 + h, off[size_t(e) + 1]); ++r) ++cover[size_t(r)];
      bad += r0 < off[size_t(e)];
    }
    for (int c : cover) bad += c != 1;
  }
  out.push_back(result("moe_route(weights)", shape, num, den, written, 1e-4));
  out.push_back(result("moe_route(counts,sort,tiles)", shape + fmt::format(" rows={}", o), double(bad), 0, true, 0));
}

// y[row] = x[src(row)] . W[e(row)]^T in fp64 for every routed row (sorted by expert), src(row) the
// row's token when gathering, else the row itself.
std::vector<double> grouped_reference(const std::vector<int>& off, const std::vector<int>& tor, const std::vector<double>& xin,
                                      const std::vector<double>& w, bool gather, int count, int64_t n, int64_t kdim) {
  std::vector<double> ref(size_t(off[size_t(count)]) * size_t(n));
  for (int e = 0; e < count; ++e)
    for (int r = off[size_t(e)]; r < off[size_t(e) + 1]; ++r) {
      const int64_t src = gather ? tor[size_t(r)] : r;
      for (int64_t c = 0; c < n; ++c) {
        double acc = 0;
        for (int64_t q = 0; q < kdim; ++q)
          acc += xin[size_t(src * kdim + q)] * w[size_t((e * n + c) * kdim + q)];
        ref[size_t(r * n + c)] = acc;
      }
    }
  return ref;
}

// The stored format of the experts under test.
enum class Fmt { Bf16, Fp8, Int8, Int4, Mxfp4 };
const char* fmt_suffix(Fmt f) {
  return f == Fmt::Fp8 ? "_fp8" : f == Fmt::Int8 ? "_int8" : f == Fmt::Int4 ? "_int4" : f == Fmt::Mxfp4 ? "_mxfp4" : "";
}

// Random expert weights on the device and their values for the reference: bf16 in [-0.1, 0.1), or
// (fp8) every finite e4m3 code or (int8) every int8 code with one scale per expert channel in
// [1/8192, 1/4096), or (int4) every
// nibble, weight (q - 8) * s with a bf16 scale per row and 128 k in +-[1/512, 1/256), packed as
// w4_expert_layout.hpp says (the kernels and this reference address through the same functions), or (mxfp4)
// every e2m1 code with an e8m0 scale per row and 32 k in 2^-10 .. 2^-5, packed as mxfp4_expert_layout.hpp says.
struct ExpertWeights {
  Fmt fmt = Fmt::Bf16;
  gpu::DeviceBuffer w, scales;
  std::vector<double> values;
  void set(kn::MoeGemmArgs& a) const {
    if (fmt == Fmt::Fp8) a.w = nullptr, a.w_fp8 = w.as<uint8_t>(), a.w_scale = scales.as<float>();
    else if (fmt == Fmt::Int8) a.w = nullptr, a.w_int8 = w.as<int8_t>(), a.w_scale = scales.as<float>();
    else if (fmt == Fmt::Int4) a.w = nullptr, a.w_int4 = w.as<uint32_t>(), a.w_int4_scale = scales.as<bf16>();
    else if (fmt == Fmt::Mxfp4) a.w = nullptr, a.w_mxfp4 = w.as<uint32_t>(), a.w_mxfp4_scale = scales.as<uint8_t>();
    else a.w = w.as<bf16>();
  }
};

ExpertWeights expert_weights(int dev, std::mt19937_64& rng, int64_t count, int64_t n, int64_t kdim, Fmt fmt) {
  ExpertWeights ew;
  ew.fmt = fmt;
  const size_t total = size_t(count * n * kdim);
  ew.values.resize(total);
  if (fmt == Fmt::Int4) {
    std::vector<uint32_t> words(size_t(kn::w4e_words(count, n, kdim)), 0);
    std::vector<bf16> sc(size_t(kn::w4e_scales(count, n, kdim)));
    std::uniform_real_distribution<float> su(1.f / 512, 1.f / 256);
    for (auto& v : sc) v = __float2bfloat16(rng() % 2 ? su(rng) : -su(rng));
    std::uniform_int_distribution<int> nib(0, 15);
    for (int64_t e = 0; e < count; ++e)
      for (int64_t r = 0; r < n; ++r)
        for (int64_t q = 0; q < kdim; ++q) {
          const uint32_t code = uint32_t(nib(rng));
          words[size_t(kn::w4e_word(n, kdim, e, r, q))] |= code << kn::w4e_shift(q);
          ew.values[size_t((e * n + r) * kdim + q)] =
              (double(code) - 8.0) * double(__bfloat162float(sc[size_t(kn::w4e_scale(n, kdim, e, r, q))]));
        }
    ew.w = gpu::DeviceBuffer(dev, words.size() * 4);
    CUDA_CHECK(cudaMemcpy(ew.w.get(), words.data(), words.size() * 4, cudaMemcpyHostToDevice));
    ew.scales = upload(dev, sc);
    return ew;
  }
  if (fmt == Fmt::Mxfp4) {
    std::vector<uint32_t> words(size_t(kn::mxe_words(count, n, kdim)), 0);
    std::vector<uint8_t> sc(size_t(kn::mxe_scales(count, n, kdim)));
    std::uniform_int_distribution<int> ex(117, 122), nib(0, 15);
    for (auto& v : sc) v = uint8_t(ex(rng));
    for (int64_t e = 0; e < count; ++e)
      for (int64_t r = 0; r < n; ++r)
        for (int64_t q = 0; q < kdim; ++q) {
          const uint32_t code = uint32_t(nib(rng));
          words[size_t(kn::mxe_word(n, kdim, e, r, q))] |= code << (4 * (q % 8));
          ew.values[size_t((e * n + r) * kdim + q)] =
              kn::e2m1_value(code) * std::ldexp(1.0, int(sc[size_t(kn::mxe_scale(n, kdim, e, r, q))]) - 127);
        }
    ew.w = gpu::DeviceBuffer(dev, words.size() * 4);
    CUDA_CHECK(cudaMemcpy(ew.w.get(), words.data(), words.size() * 4, cudaMemcpyHostToDevice));
    ew.scales = gpu::DeviceBuffer(dev, sc.size());
    CUDA_CHECK(cudaMemcpy(ew.scales.get(), sc.data(), sc.size(), cudaMemcpyHostToDevice));
    return ew;
  }
  if (fmt == Fmt::Bf16) {
    const auto w = random_bf16(total, rng, 0.1);
    for (size_t i = 0; i < total; ++i) ew.values[i] = bf16_value(w[i]);
    ew.w = upload(dev, w);
    return ew;
  }
  std::vector<uint8_t> codes(total);
  std::uniform_int_distribution<int> byte(0, 255);
  for (auto& c : codes) {
    do c = uint8_t(byte(rng));
    while (fmt == Fmt::Fp8 && (c & 0x7F) == 0x7F);  // not e4m3's NaN codes
  }
  std::vector<float> sc(size_t(count * n));
  std::uniform_real_distribution<float> su(1.f / 8192, 1.f / 4096);
  for (auto& v : sc) v = su(rng);
  for (size_t i = 0; i < total; ++i)
    ew.values[i] = (fmt == Fmt::Fp8 ? e4m3_value(codes[i]) : double(int8_t(codes[i]))) * double(sc[i / size_t(kdim)]);
  ew.w = gpu::DeviceBuffer(dev, total);
  CUDA_CHECK(cudaMemcpy(ew.w.get(), codes.data(), total, cudaMemcpyHostToDevice));
  ew.scales = upload_floats(dev, sc);
  return ew;
}

// The tokens' values as a kernel multiplies them: bf16, or (per_token = Fp8 / Int8: cuBLASLt's W8A8 per
// expert) quantized per row to e4m3 at amax / 448 or to int8 at amax / 127, as kernels/quant.cu does
// before the 8-bit matmul; `block` > 0: per (row, `block` k) instead, as the 8-bit tensor-core grouped
// kernel quantizes them (moe_gemm_w8mma.cu, 64 k).
std::vector<double> token_values(const std::vector<bf16>& x, int64_t kdim, Fmt per_token = Fmt::Bf16,
                                 int64_t block = 0) {
  std::vector<double> v(x.size());
  for (size_t i = 0; i < x.size(); ++i) v[i] = bf16_value(x[i]);
  if (per_token != Fmt::Fp8 && per_token != Fmt::Int8) return v;
  const bool fp8 = per_token == Fmt::Fp8;
  const size_t span = size_t(block > 0 ? block : kdim);
  for (size_t r0 = 0; r0 < v.size(); r0 += span) {
    float amax = 0.f;
    for (size_t c = 0; c < span; ++c) amax = std::max(amax, std::fabs(float(v[r0 + c])));
    const float s = amax > 0.f ? amax / (fp8 ? 448.f : 127.f) : 1.f, inv = 1.f / s;
    for (size_t c = 0; c < span; ++c) {
      const float q = float(v[r0 + c]) * inv;
      v[r0 + c] = (fp8 ? e4m3_value(e4m3_code(q)) : double(std::nearbyint(std::clamp(q, -127.f, 127.f)))) * double(s);
    }
  }
  return v;
}

// y[row] = x[src(row)] . W[e(row)]^T against fp64, for one tile kind; kind 3: the 8-bit tensor-core tiled
// kernel whatever PEERPLAN_MOE_W8_MMA says (8-bit experts, k % 64 == 0).
void check_gemm(std::vector<SelfTestResult>& out, int dev, std::mt19937_64& rng, const Routed& x, int64_t n,
                int64_t kdim, bool gather, int kind, bool split = true, int64_t max_rows_hint = 0, int gemv_shape = -1,
                Fmt fmt = Fmt::Bf16) {
  const int64_t entries = x.tokens * x.topk;
  const auto off = download(x.r.offsets, size_t(x.count + 1));
  const auto tor = download(x.r.token_of_row, size_t(entries));
  const int rows = off[size_t(x.count)];
  const int64_t in_rows = gather ? x.tokens : rows;
  const auto xin = random_bf16(size_t(std::max<int64_t>(in_rows, 1) * kdim), rng, 1.0);
  const ExpertWeights w = expert_weights(dev, rng, x.count, n, kdim, fmt);
  auto dx = upload(dev, xin);
  auto dy = poisoned(dev, size_t(rows) * size_t(n));
  kn::MoeGemmArgs a;
  a.x = dx.as<bf16>();
  a.gather = gather ? x.r.token_of_row : nullptr;
  w.set(a);
  a.y = dy.as<bf16>();
  a.n = n, a.k = kdim, a.entries = entries;
  a.touched = split ? 0 : int64_t(1) << 30;  // stream kernels: k split over 4 warps, or not
  a.max_rows = max_rows_hint;                 // 1 to 4 with kind 0 / 1: the gemv kernel
  a.gemv_shape = gemv_shape;
  if (kind == 3 && !kn::moe_w8mma_supported(a)) return;  // FP8 before compute capability 8.9: no such kernel
  const bool mma8 = kind == 3 || kn::moe_w8mma_takes(a, kind);
  if (kind == 3) kn::moe_grouped_gemm_w8mma(a, x.r, nullptr);
  else kn::moe_grouped_gemm_kind(a, x.r, kind, nullptr);
  const std::vector<double> ref = grouped_reference(off, tor, mma8 ? token_values(xin, kdim, fmt, 64) : token_values(xin, kdim),
                                                    w.values, gather, x.count, n, kdim);
  int max_rows = 0;
  for (int e = 0; e < x.count; ++e) max_rows = std::max(max_rows, off[size_t(e) + 1] - off[size_t(e)]);
  static const char* names[] = {"stream16", "stream32", "tiled64"};
  const bool gemv = kind < 2 && kn::moe_gemv_rows(max_rows_hint) && fmt != Fmt::Int4 && fmt != Fmt::Mxfp4;  // 4-bit: no gemv
  const std::string kname = gemv ? (kind == 0 ? "gemv16" : "gemv32") : mma8 ? "tiled64-mma8" : names[std::min(kind, 2)];
  out.push_back(compare(fmt::format("moe_gemm{}({})", fmt_suffix(fmt), kname),
                        fmt::format("rows={} max/expert={} experts={} n={} k={}{}{}{}", rows, max_rows, x.count, n, kdim,
                                    gather ? " gather" : "", kind < 2 && !split ? " no-split" : "",
                                    gemv ? fmt::format(" {} per pass{}", max_rows_hint <= 2 ? 2 : 4,
                                                       gemv_shape >= 0 ? fmt::format(" shape {}", gemv_shape) : "")
                                         : ""),
                        dy, ref));
}

// gate_up (gathered) with SiLU(gate) * up in the gemv's epilogue (MoeGemmArgs::act) against the same call
// unfused then silu_mul: bit for bit (each output's sum is computed as unfused; planner/compile/act_fusion.hpp).
void check_gemm_act(std::vector<SelfTestResult>& out, int dev, std::mt19937_64& rng, const Routed& x, int64_t inter,
                    int64_t kdim, int kind, int64_t max_rows_hint, int gemv_shape = -1) {
  const int64_t entries = x.tokens * x.topk, n = 2 * inter;
  const auto off = download(x.r.offsets, size_t(x.count + 1));
  const int rows = off[size_t(x.count)];
  const auto xin = random_bf16(size_t(x.tokens * kdim), rng, 1.0);
  const ExpertWeights w = expert_weights(dev, rng, x.count, n, kdim, Fmt::Bf16);
  auto dx = upload(dev, xin);
  auto dy = poisoned(dev, size_t(std::max(rows, 1)) * size_t(n));
  auto dref = poisoned(dev, size_t(std::max(rows, 1)) * size_t(inter)), dact = poisoned(dev, size_t(std::max(rows, 1)) * size_t(inter));
  kn::MoeGemmArgs a;
  a.x = dx.as<bf16>();
  a.gather = x.r.token_of_row;
  w.set(a);
  a.y = dy.as<bf16>();
  a.n = n, a.k = kdim, a.entries = entries, a.max_rows = max_rows_hint, a.gemv_shape = gemv_shape;
  const std::string shape = fmt::format("rows={} experts={} inter={} k={} max_rows={}{}", rows, x.count, inter, kdim,
                                        max_rows_hint, gemv_shape >= 0 ? fmt::format(" shape {}", gemv_shape) : "");
  if (!kn::moe_gemm_act_takes(a, kind)) {  // PEERPLAN_MOE_GEMV=0: the executor runs it unfused
    out.push_back(result("moe_gemm(act epilogue)", shape + " not taken (PEERPLAN_MOE_GEMV=0?)", 0, 0, false, 0));
    return;
  }
  kn::moe_grouped_gemm_kind(a, x.r, kind, nullptr);
  kn::silu_mul(dy.as<bf16>(), dref.as<bf16>(), rows, inter, nullptr);
  a.act = dact.as<bf16>();
  kn::moe_grouped_gemm_kind(a, x.r, kind, nullptr);
  CUDA_CHECK(cudaDeviceSynchronize());
  const auto f = download(dact.as<bf16>(), size_t(rows) * size_t(inter));
  const auto u = download(dref.as<bf16>(), size_t(rows) * size_t(inter));
  size_t bad = 0, unwritten = 0;
  for (size_t i = 0; i < f.size(); ++i) {
    unsigned short fb, ub;
    std::memcpy(&fb, &f[i], 2), std::memcpy(&ub, &u[i], 2);
    unwritten += (fb & 0x7fff) > 0x7f80;  // still the poison NaN
    bad += fb != ub;
  }
  out.push_back(result("moe_gemm(act epilogue)", shape + " (bit-exact; error = elements that differ)", double(bad), 0,
                       unwritten == 0, 0));
}

// The executor's call (moe_expert_gemm, engine_moe.cpp) eager with threshold `min_gflop` (0: cuBLASLt
// per expert whatever the rows; huge: the grouped kernel), against the same fp64 reference: the
// path it must take is checked too (a wrong path fails the row: its error is set to infinity).
void check_expert_gemm(std::vector<SelfTestResult>& out, int dev, std::mt19937_64& rng, const Routed& x, int64_t n,
                       int64_t kdim, bool gather, double min_gflop, kn::MoeExpertPath want, Fmt fmt = Fmt::Bf16) {
  const int64_t entries = x.tokens * x.topk;
  const auto off = download(x.r.offsets, size_t(x.count + 1));
  const auto tor = download(x.r.token_of_row, size_t(entries));
  const int rows = off[size_t(x.count)];
  int touched = 0, empty = 0, max_rows = 0;
  for (int e = 0; e < x.count; ++e) {
    const int c = off[size_t(e) + 1] - off[size_t(e)];
    touched += c > 0, empty += c == 0, max_rows = std::max(max_rows, c);
  }
  const int64_t in_rows = gather ? x.tokens : rows;
  const auto xin = random_bf16(size_t(std::max<int64_t>(in_rows, 1) * kdim), rng, 1.0);
  const ExpertWeights w = expert_weights(dev, rng, x.count, n, kdim, fmt);
  auto dx = upload(dev, xin);
  auto dy = poisoned(dev, size_t(std::max(rows, 1)) * size_t(n));
  gpu::DeviceBuffer gathered(dev, size_t(std::max<int64_t>(entries, 1) * kdim) * 2);
  CUDA_CHECK(cudaMemset(gathered.get(), 0xff, gathered.bytes()));  // NaNs: an ungathered row fails
  gpu::GemmRunner cublas(dev);
  gpu::QuantGemmRunner qcublas(dev);
  kn::MoeExpertGemmArgs d;
  d.gemm.x = dx.as<bf16>();
  d.gemm.gather = gather ? x.r.token_of_row : nullptr;
  w.set(d.gemm);
  d.gemm.y = dy.as<bf16>();
  d.gemm.n = n, d.gemm.k = kdim, d.gemm.entries = entries, d.gemm.max_rows = max_rows, d.gemm.touched = touched;
  d.rows = rows, d.x_rows = x.tokens;
  d.min_gflop = min_gflop;
  d.cublas = &cublas;
  d.qcublas = &qcublas;
  d.gathered = gathered.as<bf16>(), d.gathered_cap = entries * kdim;
  const kn::MoeExpertPath path = kn::moe_expert_gemm(d, x.r, nullptr);
  SelfTestResult res = compare(fmt::format("moe_expert_gemm{}({})", fmt_suffix(fmt), kn::moe_expert_path_name(want)),
                               fmt::format("rows={} touched={}/{} empty={} max/expert={} n={} k={}{}{}", rows, touched,
                                           x.count, empty, max_rows, n, kdim, gather ? " gather" : "",
                                           x.cdf_host.empty() ? "" : " skewed"),
                               dy,
                               grouped_reference(off, tor,
                                                 path == kn::MoeExpertPath::CublasPerExpert ? token_values(xin, kdim, fmt)
                                                 : kn::moe_w8mma_takes(d.gemm, kn::moe_gemm_tile_kind(max_rows, gather))
                                                     ? token_values(xin, kdim, fmt, 64)
                                                     : token_values(xin, kdim),
                                                 w.values, gather, x.count, n, kdim));
  if (path != want) {
    res.shape += fmt::format(" TOOK {}", kn::moe_expert_path_name(path));
    res.rel_error = INFINITY;
  }
  out.push_back(res);
}

void check_combine(std::vector<SelfTestResult>& out, int dev, std::mt19937_64& rng, const Routed& x, int64_t H) {
  const int64_t entries = x.tokens * x.topk;
  const auto w = download(x.r.weights, size_t(entries));
  const auto row_of = download(x.r.row_of, size_t(entries));
  const int rows = download(x.r.offsets + x.count, 1)[0];
  const auto in = random_bf16(size_t(std::max(rows, 1)) * size_t(H), rng, 1.0);
  auto din = upload(dev, in);
  auto dout = poisoned(dev, size_t(x.tokens * H));
  kn::moe_combine(x.r, din.as<bf16>(), dout.as<bf16>(), x.tokens, x.topk, H, nullptr);
  std::vector<double> ref(size_t(x.tokens * H), 0.0);
  for (int64_t t = 0; t < x.tokens; ++t)
    for (int j = 0; j < x.topk; ++j) {
      const int r = row_of[size_t(t * x.topk + j)];
      if (r < 0) continue;
      for (int64_t c = 0; c < H; ++c) ref[size_t(t * H + c)] += double(w[size_t(t * x.topk + j)]) * bf16_value(in[size_t(r * H + c)]);
    }
  out.push_back(compare("moe_combine", fmt::format("T={} k={} H={} local [{},+{})", x.tokens, x.topk, H, x.first, x.count),
                        dout, ref));
}

}  // namespace

void moe_cases(std::vector<SelfTestResult>& out, int dev, std::mt19937_64& rng) {
  // Decode-like: 5 tokens over 60 experts (Qwen1.5-MoE), every expert local.
  Routed a = route(dev, rng, 5, 60, 4, 0, 60, {}, 0);
  check_route(out, a);
  // Mixtral-like with several 16-row tiles per expert; an EP shard of Qwen's experts; a skewed
  // popularity (half the mass on expert 3) with top-6 over 64 experts (DeepSeek-V2-Lite).
  Routed b = route(dev, rng, 150, 8, 2, 0, 8, {}, 0);
  check_route(out, b);
  Routed c = route(dev, rng, 37, 60, 4, 15, 15, {}, 0);
  check_route(out, c);
  std::vector<float> cdf(64);
  for (int e = 0; e < 64; ++e) cdf[size_t(e)] = e < 3 ? float(e + 1) / 128.f : e == 3 ? 0.5f + 4.f / 128.f : 0;
  for (int e = 4; e < 64; ++e) cdf[size_t(e)] = cdf[3] + (1.f - cdf[3]) * float(e - 3) / 60.f;
  cdf[63] = 1.f;
  Routed s = route(dev, rng, 200, 64, 6, 0, 64, cdf, 0);
  check_route(out, s);
  // Both paths on the same shapes: the ones above past kMoeOneCtaMaxTokens took the grid, so the
  // one CTA takes a skewed 200; a prefill-sized batch (Qwen1.5-MoE's 2344-token prompt of the
  // 2026-12-03 validation) and an EP shard of it take each path and are timed by both.
  check_route(out, route(dev, rng, 200, 64, 6, 0, 64, cdf, 0, 0));
  for (int path = 0; path < 2; ++path) {
    check_route(out, route(dev, rng, 2344, 60, 4, 0, 60, {}, 0, path));
    check_route(out, route(dev, rng, 3000, 60, 4, 15, 15, {}, 0, path));
  }
  // Every size of the one-CTA kernel (kernels::moe_route_threads: 64, 128, 256, 512, 1024 threads).
  struct Small { int T, E, k; };
  for (const Small c : {Small{1, 60, 4}, Small{1, 8, 2}, Small{3, 8, 2}, Small{2, 160, 6}, Small{7, 64, 6},
                        Small{16, 8, 2}, Small{1, 300, 8}, Small{1, 1000, 8}})
    check_route(out, route(dev, rng, c.T, c.E, c.k, 0, c.E, {}, 0, 0));
  time_route_paths(dev, route(dev, rng, 1, 60, 4, 0, 60, {}, 0));  // a decode step at batch 1
  time_route_paths(dev, route(dev, rng, 64, 60, 4, 0, 60, {}, 0));
  time_route_paths(dev, route(dev, rng, 2344, 60, 4, 0, 60, {}, 0));
  time_route_paths(dev, route(dev, rng, 8192, 8, 2, 0, 8, {}, 0));
  // Every kernel on few rows per expert (a) and many (b: 16-row tiles span an expert several
  // times), gathered (gate_up) and in sorted order (down); n = 200 is off the 16- and 128-row
  // weight tiles, k = 288 off the unrolled 256-column chunk.
  for (int kind = 0; kind < kn::kMoeTileKinds; ++kind) {
    check_gemm(out, dev, rng, a, 200, 288, true, kind);
    check_gemm(out, dev, rng, b, 200, 288, kind != 1, kind);
  }
  check_gemm(out, dev, rng, c, 128, 1024, true, 0);  // an EP shard: only local rows
  check_gemm(out, dev, rng, a, 200, 288, true, 0, false);  // the stream kernels without the k split
  check_gemm(out, dev, rng, b, 200, 288, false, 1, false);
  // The gemv kernel (busiest expert known to hold <= 2 rows): decode-like rows, an EP shard, a
  // longer k (the unrolled loop and the tail), and rows it was not sized for (b: up to 16 / 32 per
  // tile, taken two at a time) on both tile lists.
  check_gemm(out, dev, rng, a, 200, 288, true, 0, true, 1);
  check_gemm(out, dev, rng, a, 200, 288, false, 1, true, 2);
  check_gemm(out, dev, rng, c, 128, 1024, true, 0, true, 1);
  check_gemm(out, dev, rng, a, 72, 2080, true, 0, true, 2);
  check_gemm(out, dev, rng, b, 200, 288, true, 0, true, 2);
  check_gemm(out, dev, rng, b, 200, 288, false, 1, true, 1);
  check_gemm(out, dev, rng, a, 200, 288, true, 1, true, 4);  // 4 rows per pass
  check_gemm(out, dev, rng, a, 72, 2080, false, 0, true, 3);
  check_gemm(out, dev, rng, b, 200, 288, true, 0, true, 4);
  check_gemm(out, dev, rng, c, 128, 1024, true, 1, true, 3);
  for (int shape = 0; shape <= 4; ++shape) {  // every rows-per-warp x unroll shape (4x2, 4x4, 2x4, 8x2, 2x8)
    check_gemm(out, dev, rng, a, 72, 2080, true, 0, true, 1, shape);
    check_gemm(out, dev, rng, b, 200, 288, false, 1, true, 2, shape);
  }
  // The activation in the gemv's epilogue: decode rows (1, 2 and 4 per pass), every shape, an EP shard, a
  // half (inter = 104) off the 16 outputs of shape 3's CTA. Multiples of 8: the unfused reference's silu_mul
  // takes no other (16-byte vectors), nor does the executor's fallback.
  check_gemm_act(out, dev, rng, a, 1408, 2048, 0, 1);
  check_gemm_act(out, dev, rng, a, 1408, 2048, 1, 2);
  check_gemm_act(out, dev, rng, a, 40, 288, 1, 4);
  check_gemm_act(out, dev, rng, c, 64, 1024, 0, 1);
  for (int shape = 0; shape <= 4; ++shape) check_gemm_act(out, dev, rng, a, 104, 2080, 0, 1, shape);
  // The executor's dispatch forced onto cuBLASLt per expert (threshold 0, eager: the default
  // stream is not capturing), gate_up (gathered) and down (sorted rows), n and k multiples of 128
  // (the rule's alignment): a popularity with four hot experts and a thin tail (hot experts with
  // tens of rows, tail experts with a few or none), an EP shard of the tail only, few tokens over
  // many experts (most empty), Mixtral-like top-2 of 8; then the same call with a huge threshold
  // must stay on the grouped kernel.
  std::vector<float> hot(64);
  for (int e = 0; e < 64; ++e) hot[size_t(e)] = e < 4 ? 0.225f * float(e + 1) : 0.9f + 0.1f * float(e - 3) / 60.f;
  hot[63] = 1.f;
  Routed h = route(dev, rng, 96, 64, 6, 0, 64, hot, 0);
  check_route(out, h);
  Routed ht = route(dev, rng, 96, 64, 6, 32, 32, hot, 0);
  Routed few = route(dev, rng, 5, 64, 6, 0, 64, hot, 0);
  Routed p = route(dev, rng, 600, 8, 2, 0, 8, {}, 0);  // ~150 rows an expert: 3 tiles of 64
  for (const Routed* rt : {&h, &ht, &few, &b}) {
    check_expert_gemm(out, dev, rng, *rt, 256, 384, true, 0, kn::MoeExpertPath::CublasPerExpert);
    check_expert_gemm(out, dev, rng, *rt, 384, 256, false, 0, kn::MoeExpertPath::CublasPerExpert);
  }
  check_expert_gemm(out, dev, rng, h, 256, 1024, true, 0, kn::MoeExpertPath::CublasPerExpert);
  check_expert_gemm(out, dev, rng, h, 256, 384, true, 1e30, kn::MoeExpertPath::Grouped);
  check_expert_gemm(out, dev, rng, h, 384, 256, false, 1e30, kn::MoeExpertPath::Grouped);
  // FP8 and int8 experts (moe_gemm_fp8.cu, one template over the code): the gemv at 1-2 and 3-4 rows per
  // pass, the stream kernel with and without the k split on both tile heights (k = 288: one 64-column step
  // short, the 32-column tail; 2080 = 32 x 65), the tiled kernel (n = 200 off its 128 rows), an EP shard, and
  // the eager dispatch on cuBLASLt FP8 / int8 per expert (the tokens quantized per row: W8A8, so the tolerance
  // is the e4m3 rounding of x, ~2^-4 per element, or int8's, ~2^-8 of a row's amax, averaged over k) and on
  // the grouped kernel.
  for (const Fmt f : {Fmt::Fp8, Fmt::Int8}) {
    for (const bool gather : {true, false}) {
      check_gemm(out, dev, rng, a, 200, 288, gather, 0, true, 1, -1, f);
      check_gemm(out, dev, rng, a, 72, 2080, gather, 1, true, 2, -1, f);
      check_gemm(out, dev, rng, a, 200, 288, gather, 0, true, 4, -1, f);
      check_gemm(out, dev, rng, b, 200, 288, gather, 1, true, 3, -1, f);
      for (int kind = 0; kind < kn::kMoeTileKinds; ++kind) {
        check_gemm(out, dev, rng, a, 200, 288, gather, kind, true, 0, -1, f);
        check_gemm(out, dev, rng, b, 200, 2080, gather, kind, kind != 1, 0, -1, f);
      }
    }
    check_gemm(out, dev, rng, c, 128, 1024, true, 0, true, 1, -1, f);
    check_gemm(out, dev, rng, c, 128, 1024, true, 1, true, 0, -1, f);
    for (const Routed* rt : {&h, &few, &b}) {
      check_expert_gemm(out, dev, rng, *rt, 256, 384, true, 0, kn::MoeExpertPath::CublasPerExpert, f);
      check_expert_gemm(out, dev, rng, *rt, 384, 256, false, 0, kn::MoeExpertPath::CublasPerExpert, f);
    }
    check_expert_gemm(out, dev, rng, h, 256, 384, true, 1e30, kn::MoeExpertPath::Grouped, f);
    // The 8-bit tensor-core tiled kernel (moe_gemm_w8mma.cu, k % 64 == 0; the cases above have k % 64 = 32
    // and keep the bf16 tensor-core one): several 64-row tiles an expert (p), one partial tile (b), an EP
    // shard (c), n off the 128-row tile, k = 1408 (Qwen1.5-MoE's down, 22 stages) and 1024; and the
    // executor's grouped dispatch onto it.
    for (const bool gather : {true, false}) {
      check_gemm(out, dev, rng, p, 200, 1408, gather, 3, true, 0, -1, f);
      check_gemm(out, dev, rng, b, 136, 1024, gather, 3, true, 0, -1, f);
    }
    check_gemm(out, dev, rng, c, 128, 1024, true, 3, true, 0, -1, f);
    check_expert_gemm(out, dev, rng, p, 256, 1024, true, 1e30, kn::MoeExpertPath::Grouped, f);
  }
  // int4 experts (moe_gemm_int4.cu): the stream kernel (no gemv) on both tile heights with and without
  // the k split, one row an expert (one of its two token tiles idle) and many, the tiled kernel; n and k
  // on the packing's 16 rows and 128-k groups (k = 1408: Qwen1.5-MoE's down, 11 groups, an odd split);
  // an EP shard; the executor's eager dispatch on cuBLASLt per expert (each expert dequantized to bf16 in
  // slabs: the reference rounds nothing, so the tolerance covers the bf16 weights) and on the grouped kernel.
  for (const bool gather : {true, false}) {
    for (int kind = 0; kind < kn::kMoeTileKinds; ++kind) {
      check_gemm(out, dev, rng, a, 208, 384, gather, kind, true, 0, -1, Fmt::Int4);
      check_gemm(out, dev, rng, b, 208, 1408, gather, kind, kind != 1, 0, -1, Fmt::Int4);
    }
    check_gemm(out, dev, rng, a, 96, 1408, gather, 0, false, 1, -1, Fmt::Int4);
  }
  check_gemm(out, dev, rng, c, 128, 1024, true, 0, true, 1, -1, Fmt::Int4);
  check_gemm(out, dev, rng, c, 128, 1024, true, 1, true, 0, -1, Fmt::Int4);
  for (const Routed* rt : {&h, &few, &b}) {
    check_expert_gemm(out, dev, rng, *rt, 256, 384, true, 0, kn::MoeExpertPath::CublasPerExpert, Fmt::Int4);
    check_expert_gemm(out, dev, rng, *rt, 384, 256, false, 0, kn::MoeExpertPath::CublasPerExpert, Fmt::Int4);
  }
  check_expert_gemm(out, dev, rng, h, 256, 384, true, 1e30, kn::MoeExpertPath::Grouped, Fmt::Int4);
  // MXFP4 experts (moe_gemm_mxfp4.cu), as int4's: k on the 64-k chunks but not on 128 (k = 320, 5 chunks:
  // an odd split; 2880: gpt-oss, 45 chunks), n on the 16-row tiles; the stream kernel on both tile heights
  // with and without the k split, the tiled kernel, an EP shard, the eager cuBLASLt path per expert (each
  // expert decoded to bf16, exact) and the grouped dispatch.
  for (const bool gather : {true, false}) {
    for (int kind = 0; kind < kn::kMoeTileKinds; ++kind) {
      check_gemm(out, dev, rng, a, 208, 320, gather, kind, true, 0, -1, Fmt::Mxfp4);
      check_gemm(out, dev, rng, b, 144, 2880, gather, kind, kind != 1, 0, -1, Fmt::Mxfp4);
    }
    check_gemm(out, dev, rng, a, 96, 1472, gather, 0, false, 1, -1, Fmt::Mxfp4);
  }
  check_gemm(out, dev, rng, c, 128, 1024, true, 0, true, 1, -1, Fmt::Mxfp4);
  check_gemm(out, dev, rng, c, 128, 1024, true, 1, true, 0, -1, Fmt::Mxfp4);
  // (The cuBLAS path takes n and k multiples of 128 only, moe_cublas_path: gpt-oss's k = 2880 always stays grouped.)
  for (const Routed* rt : {&h, &few, &b}) {
    check_expert_gemm(out, dev, rng, *rt, 256, 384, true, 0, kn::MoeExpertPath::CublasPerExpert, Fmt::Mxfp4);
    check_expert_gemm(out, dev, rng, *rt, 384, 256, false, 0, kn::MoeExpertPath::CublasPerExpert, Fmt::Mxfp4);
  }
  check_expert_gemm(out, dev, rng, h, 256, 320, true, 1e30, kn::MoeExpertPath::Grouped, Fmt::Mxfp4);
  check_combine(out, dev, rng, b, 264);
  check_combine(out, dev, rng, c, 512);  // tokens with no local expert sum to zero
}

}  // namespace peerplan::exec::selftest
