// The per-class power throttle (session 17, docs/simulator.md "Power"): under the cap a mix of
// kernels settles at a clock of its own, and each class slows by its own factor there (session 16:
// a long chunk's attention 1.18x, its GEMMs 1.11x, elementwise 1.05x, where GEMMs alone slow 1.19x).
// The executor's own calls, Llama-3.1-8B-shaped, at four attention shares: after a 500 ms pause,
// ~1.5 s of rounds of G GEMMs (qkv at M = 4096, weights rotating), A prefill attentions (causal 8192
// over 8192, 32 / 8 heads, head dim 128: cuDNN where it runs, as the executor) and one SiLU-mul of
// 4096 x 14336; each call between events. ~8 s. The arithmetic is profiler/common/power_throttle.cpp.
#include <algorithm>
#include <array>
#include <chrono>
#include <thread>
#include <vector>

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "profiler/common/power_throttle.hpp"
#include "profiler/gpu/cuda_check.hpp"
#include "profiler/gpu/gemm.hpp"
#include "profiler/gpu/raii.hpp"
#include "profiler/gpu/timing.hpp"
#include "profiler/kernels/attention.hpp"
#include "profiler/kernels/elementwise.hpp"
#include "profiler/measure/pacing.hpp"

namespace peerplan::profiler {

std::vector<ThrottleMix> measure_throttle_mixes(int gpu) {
  constexpr int64_t m = 4096, n = 6144, k = 4096, kCopies = 4;
  constexpr int heads = 32, kv = 8, hd = 128, ctx = 8192;
  constexpr int64_t et = 4096, inter = 14336;
  gpu::ScopedDevice dev(gpu);
  gpu::Stream s(gpu);
  gpu::DeviceBuffer x(gpu, size_t(m * k) * 2), w(gpu, size_t(kCopies * n * k) * 2), y(gpu, size_t(m * n) * 2);
  gpu::DeviceBuffer kc(gpu, size_t(ctx) * kv * hd * 2), vc(gpu, size_t(ctx) * kv * hd * 2);
  gpu::DeviceBuffer q(gpu, size_t(ctx) * heads * hd * 2), o(gpu, size_t(ctx) * heads * hd * 2);
  gpu::DeviceBuffer ein(gpu, size_t(et * 2 * inter) * 2), eout(gpu, size_t(et * inter) * 2);
  gpu::DeviceBuffer meta(gpu, sizeof(int) * 4);
  gpu::launch_fill_bf16(x.get(), size_t(m * k), 1, s);
  gpu::launch_fill_bf16(w.get(), size_t(kCopies * n * k), 2, s);
  gpu::launch_fill_bf16(kc.get(), size_t(ctx) * kv * hd, 3, s);
  gpu::launch_fill_bf16(vc.get(), size_t(ctx) * kv * hd, 4, s);
  gpu::launch_fill_bf16(q.get(), size_t(ctx) * heads * hd, 5, s);
  gpu::launch_fill_bf16(ein.get(), size_t(et * 2 * inter), 6, s);
  const int host_meta[4] = {0, 0, ctx, ctx};  // slot 0; q_start {0, ctx}; seq_len ctx
  CUDA_CHECK(cudaMemcpy(meta.get(), host_meta, sizeof host_meta, cudaMemcpyHostToDevice));
  kernels::PrefillAttention a;
  a.q = q.as<__nv_bfloat16>();
  a.q_row_stride = int64_t(heads) * hd;
  a.k_cache = kc.as<__nv_bfloat16>();
  a.v_cache = vc.as<__nv_bfloat16>();
  a.slots = meta.as<int>();
  a.q_start = meta.as<int>() + 1;
  a.seq_lens = meta.as<int>() + 3;
  a.out = o.as<__nv_bfloat16>();
  a.num_seqs = 1, a.max_q_len = ctx;
  a.heads = heads, a.kv_heads = kv, a.head_dim = hd, a.max_ctx = ctx;
  gpu::GemmRunner runner(gpu);
  auto gemm = [&](int i) {
    runner.run(x.get(), static_cast<const char*>(w.get()) + size_t(i % kCopies) * size_t(n * k) * 2, y.get(), m, n, k, s);
  };
  auto attn = [&] { kernels::prefill_attention(a, s); };
  auto elem = [&] { kernels::silu_mul(ein.as<__nv_bfloat16>(), eout.as<__nv_bfloat16>(), et, inter, s); };
  gemm(0), attn(), elem();  // algorithm choice, cuDNN graph build, module loads: outside the timing
  s.synchronize();
  auto time_one = [&](auto&& f) {
    gpu::Event e0(gpu), e1(gpu);
    e0.record(s);
    for (int i = 0; i < 4; ++i) f(i);
    e1.record(s);
    e1.synchronize();
    return std::max(e1.seconds_since(e0) / 4, 1e-6);
  };
  const double g_s = time_one([&](int i) { gemm(i); }), a_s = time_one([&](int) { attn(); });
  std::vector<ThrottleMix> mixes;
  std::vector<std::array<bool, 3>> ran;
  // (GEMMs, attentions) a round: attention shares ~0, ~1/2, ~4/5, 1 on an H200 (0.25 / 1.0 ms a call).
  const int a_for_half = std::max(1, int(std::lround(g_s * 4 / a_s)));
  for (auto [G, A] : {std::pair{4, 0}, {4, a_for_half}, {1, a_for_half}, {0, 1}}) {
    const double round_s = G * g_s + A * a_s;
    const int rounds = int(std::clamp(1.5 / round_s, 20.0, 20000.0));
    std::vector<MixClass> cls;
    for (int r = 0; r < rounds; ++r) {
      for (int i = 0; i < G; ++i) cls.push_back(MixClass::Gemm);
      for (int i = 0; i < A; ++i) cls.push_back(MixClass::Attention);
      cls.push_back(MixClass::Elementwise);
    }
    std::vector<gpu::Event> ev;
    ev.reserve(cls.size() + 1);
    for (size_t i = 0; i <= cls.size(); ++i) ev.emplace_back(gpu);
    std::this_thread::sleep_for(std::chrono::milliseconds(500));  // the pause: the clock back at boost
    ev[0].record(s);
    for (size_t i = 0; i < cls.size(); ++i) {
      if (cls[i] == MixClass::Gemm) gemm(int(i));
      else if (cls[i] == MixClass::Attention) attn();
      else elem();
      ev[i + 1].record(s);
    }
    s.synchronize();
    std::vector<MixCall> calls;
    calls.reserve(cls.size());
    for (size_t i = 0; i < cls.size(); ++i)
      calls.push_back({cls[i], ev[i].seconds_since(ev[0]), ev[i + 1].seconds_since(ev[i])});
    mixes.push_back(analyse_throttle_mix(calls));
    ran.push_back({G > 0, A > 0, true});
  }
  return complete_mixes(mixes, ran);
}

}  // namespace peerplan::profiler
