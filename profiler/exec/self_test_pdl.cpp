// Self-test of the decode GEMV and of programmatic dependent launch (kernels/pdl.cuh): the GEMV
// against an fp64 reference on its edge shapes, then a decode MLP chain (RMSNorm -> gate_up GEMV ->
// SiLU*mul -> down GEMV -> residual add) run 20 times back to back with PDL on, on a stream and
// captured in a CUDA graph: a kernel that read its input before griddepcontrol.wait would see the
// previous step's values (each step rewrites the input first) and fail the comparison.
#include <cmath>
#include <cstdio>

#include <cuda_bf16.h>

#include <fmt/format.h>

#include "profiler/common/pdl_switch.hpp"
#include "profiler/exec/self_test_util.hpp"
#include "profiler/gpu/cuda_check.hpp"
#include "profiler/kernels/dense_gemv.hpp"
#include "profiler/kernels/elementwise.hpp"

namespace peerplan::exec::selftest {

namespace {

using bf16 = __nv_bfloat16;
namespace kn = peerplan::kernels;

std::vector<double> as_double(const std::vector<bf16>& v) {
  std::vector<double> d(v.size());
  for (size_t i = 0; i < v.size(); ++i) d[i] = bf16_value(v[i]);
  return d;
}
double round_bf16(double v) { return bf16_value(__float2bfloat16(float(v))); }

// y[M][n] = x[M][k] . W[n][k]^T, each output rounded to bf16 when `round` (what the GPU stores).
std::vector<double> ref_gemv(const std::vector<double>& x, const std::vector<double>& w, int64_t M, int64_t n, int64_t k,
                             bool round) {
  std::vector<double> y(size_t(M * n));
  for (int64_t m = 0; m < M; ++m)
    for (int64_t j = 0; j < n; ++j) {
      double s = 0;
      for (int64_t i = 0; i < k; ++i) s += x[size_t(m * k + i)] * w[size_t(j * k + i)];
      y[size_t(m * n + j)] = round ? round_bf16(s) : s;
    }
  return y;
}

void gemv_case(std::vector<SelfTestResult>& out, int dev, std::mt19937_64& rng, int64_t M, int64_t n, int64_t k) {
  const auto x = random_bf16(size_t(M * k), rng, -1, 1), w = random_bf16(size_t(n * k), rng, -0.1, 0.1);
  auto dx = upload(dev, x), dw = upload(dev, w);
  auto dy = poisoned(dev, size_t(M * n));
  kn::dense_gemv(dx.as<bf16>(), dw.as<bf16>(), dy.as<bf16>(), M, n, k, nullptr);
  CUDA_CHECK(cudaDeviceSynchronize());
  out.push_back(compare("dense_gemv", fmt::format("M={} n={} k={}", M, n, k), dy,
                        ref_gemv(as_double(x), as_double(w), M, n, k, false)));
}

// The chain of one decode MLP at hidden H, intermediate I, M tokens; `graph`: captured and replayed.
void chain_case(std::vector<SelfTestResult>& out, int dev, std::mt19937_64& rng, int64_t M, int64_t H, int64_t I,
                bool graph) {
  const int kSteps = 20;
  const auto x0 = random_bf16(size_t(M * H), rng, -1, 1), nw = random_bf16(size_t(H), rng, 0.5, 1.5);
  const auto wg = random_bf16(size_t(2 * I * H), rng, -0.05, 0.05), wd = random_bf16(size_t(H * I), rng, -0.05, 0.05);
  auto dx0 = upload(dev, x0), dnw = upload(dev, nw), dwg = upload(dev, wg), dwd = upload(dev, wd);
  auto dres = poisoned(dev, size_t(M * H)), dn = poisoned(dev, size_t(M * H)), dgu = poisoned(dev, size_t(M * 2 * I));
  auto dact = poisoned(dev, size_t(M * I)), dout = poisoned(dev, size_t(M * H));
  gpu::Stream s(dev);
  const bool was = kn::pdl::enabled();
  kn::pdl::set_enabled(true);
  auto step = [&] {
    // The step's input is rewritten first (a copy node): a kernel that ran ahead of its wait would
    // read the previous step's residual.
    CUDA_CHECK(cudaMemcpyAsync(dres.get(), dx0.get(), size_t(M * H) * 2, cudaMemcpyDeviceToDevice, s.get()));
    kn::rmsnorm(dres.as<bf16>(), dnw.as<bf16>(), dn.as<bf16>(), M, H, 1e-5f, s.get());
    kn::dense_gemv(dn.as<bf16>(), dwg.as<bf16>(), dgu.as<bf16>(), M, 2 * I, H, s.get());
    kn::silu_mul(dgu.as<bf16>(), dact.as<bf16>(), M, I, s.get());
    kn::dense_gemv(dact.as<bf16>(), dwd.as<bf16>(), dout.as<bf16>(), M, H, I, s.get());
    kn::residual_add(dres.as<bf16>(), dout.as<bf16>(), M * H, s.get());
  };
  try {
    if (graph) {
      cudaGraph_t g = nullptr;
      cudaGraphExec_t ge = nullptr;
      CUDA_CHECK(cudaStreamBeginCapture(s.get(), cudaStreamCaptureModeRelaxed));
      step();
      CUDA_CHECK(cudaStreamEndCapture(s.get(), &g));
      CUDA_CHECK(cudaGraphInstantiate(&ge, g, 0));
      for (int i = 0; i < kSteps; ++i) CUDA_CHECK(cudaGraphLaunch(ge, s.get()));
      CUDA_CHECK(cudaStreamSynchronize(s.get()));
      CUDA_CHECK(cudaGraphExecDestroy(ge));
      CUDA_CHECK(cudaGraphDestroy(g));
    } else {
      for (int i = 0; i < kSteps; ++i) step();
      CUDA_CHECK(cudaStreamSynchronize(s.get()));
    }
  } catch (...) {
    kn::pdl::set_enabled(was);
    throw;
  }
  kn::pdl::set_enabled(was);
  // Reference with the GPU's bf16 roundings at every stored tensor.
  const std::vector<double> x = as_double(x0), w = as_double(nw);
  std::vector<double> n(size_t(M * H));
  for (int64_t m = 0; m < M; ++m) {
    double ss = 0;
    for (int64_t i = 0; i < H; ++i) ss += x[size_t(m * H + i)] * x[size_t(m * H + i)];
    const double inv = 1.0 / std::sqrt(ss / double(H) + 1e-5);
    for (int64_t i = 0; i < H; ++i) n[size_t(m * H + i)] = round_bf16(x[size_t(m * H + i)] * inv * w[size_t(i)]);
  }
  const std::vector<double> gu = ref_gemv(n, as_double(wg), M, 2 * I, H, true);
  std::vector<double> act(size_t(M * I));
  for (int64_t m = 0; m < M; ++m)
    for (int64_t i = 0; i < I; ++i) {
      const double g = gu[size_t(m * 2 * I + i)], u = gu[size_t(m * 2 * I + I + i)];
      act[size_t(m * I + i)] = round_bf16(g / (1 + std::exp(-g)) * u);
    }
  const std::vector<double> d = ref_gemv(act, as_double(wd), M, H, I, true);
  std::vector<double> res(size_t(M * H));
  for (size_t i = 0; i < res.size(); ++i) res[i] = x[i] + d[i];
  out.push_back(compare("pdl_chain", fmt::format("{} steps, M={} H={} I={}{}", kSteps, M, H, I, graph ? ", graph" : ""),
                        dres, res));
}

}  // namespace

void pdl_cases(std::vector<SelfTestResult>& out, int dev, std::mt19937_64& rng) {
  gemv_case(out, dev, rng, 1, 1000, 1000);  // n not a multiple of 4, k not of 256
  gemv_case(out, dev, rng, 2, 60, 2048);    // a router
  gemv_case(out, dev, rng, 1, 1, 2048);     // Qwen1.5-MoE's shared-expert gate
  gemv_case(out, dev, rng, 2, 4096, 14336); // Llama-3.1-8B's down
  gemv_case(out, dev, rng, 1, 24, 8);       // one 16-byte piece per row
  // Small matrices at 3-8 tokens (gemv_rule.hpp): the 4- and 8-token tiles with rows of the tile unused.
  gemv_case(out, dev, rng, 3, 60, 2048);    // Qwen1.5-MoE's router
  gemv_case(out, dev, rng, 4, 32, 2880);    // gpt-oss-20b's router (k not a multiple of 256)
  gemv_case(out, dev, rng, 5, 1, 2048);     // the shared-expert gate
  gemv_case(out, dev, rng, 8, 576, 2048);   // MLA's kv_a
  gemv_case(out, dev, rng, 7, 1022, 4096);  // near the rule's limits, n not a multiple of 4
  gemv_case(out, dev, rng, 6, 4096, 4096);  // a large matrix, as PEERPLAN_SMALL_GEMV=all runs it
  chain_case(out, dev, rng, 1, 2048, 1408, false);
  chain_case(out, dev, rng, 2, 4096, 2816, true);
}

}  // namespace peerplan::exec::selftest
