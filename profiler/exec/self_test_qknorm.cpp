// GPU self-test of Qwen3's per-head QK-norm (issue 23) against an fp64 CPU reference: every q and
// k head of a fused QKV row normalised over its head_dim (weights q_norm / k_norm, eps 1e-6, as
// transformers' Qwen3RMSNorm), the v heads left as they were. The kernel works in place, so the
// whole row is compared: an element not written keeps its random input and fails the case.
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include <cuda_bf16.h>

#include <fmt/format.h>

#include "profiler/exec/self_test_qknorm.hpp"
#include "profiler/exec/self_test_util.hpp"
#include "profiler/gpu/cuda_check.hpp"
#include "profiler/gpu/raii.hpp"
#include "profiler/kernels/qk_norm.hpp"

namespace peerplan::exec::selftest {

namespace {

using bf16 = __nv_bfloat16;
namespace kn = peerplan::kernels;
constexpr float kEps = 1e-6f;

struct Shape {
  int tokens, heads, kv_heads, head_dim;
  std::string what;
};

struct Case {
  std::vector<bf16> qkv, w;       // rows [tokens][(heads + 2 kv_heads) head_dim]; w: q_norm then k_norm
  std::vector<double> ref;        // the rows after the norm (v as given)
  int64_t row = 0;
};


// Inputs of a shape and their fp64 reference. Values in [-4, 4] (activations out of a GEMM), the
// weights in [0.5, 1.5] (trained q/k norm weights sit around 1) so a swapped q/k weight shows.
Case make_case(const Shape& s, std::mt19937_64& rng) {
  Case c;
  const int D = s.head_dim;
  c.row = int64_t(s.heads + 2 * s.kv_heads) * D;
  c.qkv = random_bf16(size_t(s.tokens * c.row), rng, -4.0, 4.0);
  c.w = random_bf16(size_t(2 * D), rng, 0.5, 1.5);
  c.ref.resize(c.qkv.size());
  for (size_t i = 0; i < c.qkv.size(); ++i) c.ref[i] = bf16_value(c.qkv[i]);
  for (int t = 0; t < s.tokens; ++t)
    for (int h = 0; h < s.heads + s.kv_heads; ++h) {
      const size_t base = size_t(t * c.row + int64_t(h) * D);
      const size_t wbase = h < s.heads ? 0 : size_t(D);
      double ss = 0;
      for (int j = 0; j < D; ++j) ss += c.ref[base + size_t(j)] * c.ref[base + size_t(j)];
      const double inv = 1.0 / std::sqrt(ss / D + double(kEps));
      for (int j = 0; j < D; ++j) c.ref[base + size_t(j)] *= inv * bf16_value(c.w[wbase + size_t(j)]);
    }
  return c;
}

kn::QkNormArgs args_of(const Shape& s, const Case& c, gpu::DeviceBuffer& qkv, const gpu::DeviceBuffer& w) {
  kn::QkNormArgs a;
  a.qkv = qkv.as<bf16>();
  a.row_stride = c.row;
  a.q_weight = w.as<bf16>();
  a.k_weight = w.as<bf16>() + s.head_dim;
  a.tokens = s.tokens;
  a.heads = s.heads;
  a.kv_heads = s.kv_heads;
  a.head_dim = s.head_dim;
  a.eps = kEps;
  return a;
}

std::string shape_text(const Shape& s) {
  return fmt::format("{} tokens q={} k={} D={} ({})", s.tokens, s.heads, s.kv_heads, s.head_dim, s.what);
}

void direct_case(std::vector<SelfTestResult>& out, int dev, std::mt19937_64& rng, const Shape& s) {
  const Case c = make_case(s, rng);
  gpu::DeviceBuffer qkv = upload(dev, c.qkv), w = upload(dev, c.w);
  kn::qk_norm(args_of(s, c, qkv, w), nullptr);
  out.push_back(compare("qk_norm", shape_text(s), qkv, c.ref));
}

// Captured in a CUDA graph with the copy that restores its input, replayed twice: the kernel
// allocates nothing and never synchronises with the host, as the executor's decode graphs need.
void graph_case(std::vector<SelfTestResult>& out, int dev, std::mt19937_64& rng, const Shape& s) {
  const Case c = make_case(s, rng);
  gpu::DeviceBuffer pristine = upload(dev, c.qkv), w = upload(dev, c.w);
  gpu::DeviceBuffer qkv = poisoned(dev, c.qkv.size());
  gpu::Stream stream(dev);
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
  CUDA_CHECK(cudaMemcpyAsync(qkv.get(), pristine.get(), c.qkv.size() * 2, cudaMemcpyDeviceToDevice, stream));
  kn::qk_norm(args_of(s, c, qkv, w), stream);
  CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
  CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  for (int i = 0; i < 2; ++i) CUDA_CHECK(cudaGraphLaunch(exec, stream));
  stream.synchronize();
  out.push_back(compare("qk_norm(CUDA graph)", shape_text(s), qkv, c.ref));
  CUDA_CHECK(cudaGraphExecDestroy(exec));
  CUDA_CHECK(cudaGraphDestroy(graph));
}

}  // namespace

void qk_norm_cases(std::vector<SelfTestResult>& out, int dev, std::mt19937_64& rng) {
  const std::vector<Shape> shapes = {
      {5, 32, 8, 128, "Qwen3-8B"},
      {3, 8, 1, 128, "Qwen3-30B-A3B TP4 shard"},
      {13, 8, 1, 128, "117 heads: last block partly idle"},
      {4, 16, 2, 64, "D=64"},
      {4, 12, 4, 80, "D=80"},
      {4, 12, 4, 96, "D=96"},
      {2, 8, 2, 256, "D=256, the largest"},
      {1024, 32, 8, 128, "Qwen3-8B prefill"},
  };
  for (const Shape& s : shapes) direct_case(out, dev, rng, s);
  graph_case(out, dev, rng, {16, 32, 8, 128, "Qwen3-8B decode batch 16"});
}

}  // namespace peerplan::exec::selftest
