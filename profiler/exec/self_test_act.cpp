// Self-test of the activation in the gate_up GEMV's epilogue (planner/compile/act_fusion.hpp): each fused
// kernel against the same GEMV unfused followed by silu_mul, on the same inputs. bf16 and int8 (one
// block's partial sums in a fixed order) must match bit for bit; W4A16 v7's split-K partials meet by
// atomics in any order, so it is held to the usual relative tolerance, which a wrong gate / up pairing
// (an O(1) error) fails all the same. The routed experts' gemv is checked in self_test_moe.cpp.
#include <cstring>

#include <cuda_bf16.h>

#include <fmt/format.h>

#include "profiler/exec/self_test_util.hpp"
#include "profiler/gpu/cuda_check.hpp"
#include "profiler/kernels/dense_gemv.hpp"
#include "profiler/kernels/elementwise.hpp"
#include "profiler/kernels/w4a16.hpp"

namespace peerplan::exec::selftest {

namespace {

using bf16 = __nv_bfloat16;
namespace kn = peerplan::kernels;

std::vector<bf16> download_bf16(const gpu::DeviceBuffer& b, size_t n) {
  std::vector<bf16> v(n);
  CUDA_CHECK(cudaMemcpy(v.data(), b.get(), n * 2, cudaMemcpyDeviceToHost));
  return v;
}

// The fused output against the unfused one: exact (tolerance 0, mismatched elements counted) or within
// the usual relative error.
SelfTestResult against_unfused(const std::string& kernel, const std::string& shape, const gpu::DeviceBuffer& fused,
                               const gpu::DeviceBuffer& unfused, size_t n, bool exact) {
  std::vector<double> ref(n);
  const std::vector<bf16> u = download_bf16(unfused, n);
  for (size_t i = 0; i < n; ++i) ref[i] = bf16_value(u[i]);
  SelfTestResult r = compare(kernel, shape, fused, ref);
  if (exact && r.all_written) {
    const std::vector<bf16> f = download_bf16(fused, n);
    size_t bad = 0;
    for (size_t i = 0; i < n; ++i) bad += std::memcmp(&f[i], &u[i], 2) != 0;
    r.rel_error = double(bad);
    r.tolerance = 0;
    r.shape += " (bit-exact; error = elements that differ)";
  }
  return r;
}

// bf16 (int8 = false) or int8 W8A16 gate_up [2 x inter][k] at M rows.
void dense_case(std::vector<SelfTestResult>& out, int dev, std::mt19937_64& rng, int64_t M, int64_t inter, int64_t k,
                bool int8) {
  const int64_t n = 2 * inter;
  const auto x = random_bf16(size_t(M * k), rng, -1, 1);
  auto dx = upload(dev, x);
  auto dy = poisoned(dev, size_t(M * n)), dref = poisoned(dev, size_t(M * inter)), dact = poisoned(dev, size_t(M * inter));
  gpu::DeviceBuffer dw, ds;
  if (int8) {
    std::vector<int8_t> codes(size_t(n * k));
    std::uniform_int_distribution<int> q(-127, 127);
    for (auto& c : codes) c = int8_t(q(rng));
    std::vector<float> sc(static_cast<size_t>(n));
    std::uniform_real_distribution<float> s(0.0005f, 0.002f);
    for (auto& v : sc) v = s(rng);
    dw = gpu::DeviceBuffer(dev, codes.size());
    ds = gpu::DeviceBuffer(dev, sc.size() * 4);
    CUDA_CHECK(cudaMemcpy(dw.get(), codes.data(), codes.size(), cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(ds.get(), sc.data(), sc.size() * 4, cudaMemcpyHostToDevice));
    kn::dense_gemv_int8(dx.as<bf16>(), dw.as<int8_t>(), ds.as<float>(), dy.as<bf16>(), M, n, k, nullptr);
    kn::dense_gemv_int8(dx.as<bf16>(), dw.as<int8_t>(), ds.as<float>(), dact.as<bf16>(), M, n, k, nullptr, true);
  } else {
    dw = upload(dev, random_bf16(size_t(n * k), rng, -0.1, 0.1));
    kn::dense_gemv(dx.as<bf16>(), dw.as<bf16>(), dy.as<bf16>(), M, n, k, nullptr);
    kn::dense_gemv(dx.as<bf16>(), dw.as<bf16>(), dact.as<bf16>(), M, n, k, nullptr, true);
  }
  kn::silu_mul(dy.as<bf16>(), dref.as<bf16>(), M, inter / 8 * 8, nullptr);
  CUDA_CHECK(cudaDeviceSynchronize());
  // silu_mul takes whole 8-element vectors: compare the columns it wrote (inter is a multiple of 8 here).
  out.push_back(against_unfused(int8 ? "dense_gemv_int8(act epilogue)" : "dense_gemv(act epilogue)",
                                fmt::format("M={} inter={} k={}", M, inter, k), dact, dref, size_t(M * inter), true));
}

// W4A16 v7 gate_up at M rows: random codes and scales (every word is a valid code), both calls on one
// workspace (v7 re-zeroes it).
void w4_case(std::vector<SelfTestResult>& out, int dev, int sms, std::mt19937_64& rng, int64_t M, int64_t inter,
             int64_t k) {
  const int64_t n = 2 * inter;
  if (!kn::w4a16_fuses_act(M, n)) return;  // another variant forced (PEERPLAN_W4A16): nothing fuses
  std::vector<uint32_t> words(size_t(n * k / 8));
  for (auto& w : words) w = uint32_t(rng());
  auto dw = gpu::DeviceBuffer(dev, words.size() * 4);
  CUDA_CHECK(cudaMemcpy(dw.get(), words.data(), words.size() * 4, cudaMemcpyHostToDevice));
  auto dscale = upload(dev, random_bf16(size_t(n * (k / kn::kW4Group)), rng, 0.001, 0.01));
  auto dx = upload(dev, random_bf16(size_t(M * k), rng, -1, 1));
  auto dy = poisoned(dev, size_t(M * n)), dref = poisoned(dev, size_t(M * inter)), dact = poisoned(dev, size_t(M * inter));
  const size_t wsb = kn::w4a16_workspace_bytes(M, n, k, sms);
  gpu::DeviceBuffer ws(dev, std::max<size_t>(wsb, 16));
  CUDA_CHECK(cudaMemset(ws.get(), 0, ws.bytes()));
  kn::W4A16Gemm a;
  a.x = dx.as<bf16>(), a.w = dw.as<uint32_t>(), a.scales = dscale.as<bf16>(), a.y = dy.as<bf16>();
  a.workspace = wsb ? ws.as<float>() : nullptr;
  a.M = M, a.n = n, a.k = k;
  kn::w4a16_gemm(a, sms, nullptr);
  kn::silu_mul(dy.as<bf16>(), dref.as<bf16>(), M, inter, nullptr);
  a.y = dact.as<bf16>();
  a.act = true;
  kn::w4a16_gemm(a, sms, nullptr);
  CUDA_CHECK(cudaDeviceSynchronize());
  out.push_back(against_unfused("w4a16_gemm v7(act epilogue)",
                                fmt::format("M={} inter={} k={} splits={}", M, inter, k, kn::w4a16_splits(M, n, k, sms)),
                                dact, dref, size_t(M * inter), false));
}

}  // namespace

void act_cases(std::vector<SelfTestResult>& out, int dev, int sms, std::mt19937_64& rng) {
  dense_case(out, dev, rng, 1, 1408, 2048, false);   // Qwen1.5-MoE's shared experts' quarter
  dense_case(out, dev, rng, 2, 14336, 4096, false);  // Llama-3.1-8B
  dense_case(out, dev, rng, 1, 1000, 1000, false);   // a half with a partial block, k not of 256
  dense_case(out, dev, rng, 2, 5632, 2048, true);    // int8 W8A16, Qwen1.5-MoE's shared MLP
  dense_case(out, dev, rng, 1, 1000, 1008, true);
  w4_case(out, dev, sms, rng, 1, 14336, 4096);       // Llama-3.1-8B: split-K
  w4_case(out, dev, sms, rng, 2, 14336, 4096);
  w4_case(out, dev, sms, rng, 1, 28672, 8192);       // Llama-3.1-70B
  w4_case(out, dev, sms, rng, 1, 16, 128);           // one column group, one chunk: no split
  w4_case(out, dev, sms, rng, 2, 48, 256);           // M = 2: six column groups of 8 gate rows
}

}  // namespace peerplan::exec::selftest
