// The per-class power throttle (session 17, docs/simulator.md "Power"): under the cap a mix of
// kernels settles at a clock of its own, and each class slows by its own factor there (session 16:
// a long chunk's attention 1.18x, its GEMMs 1.11x, elementwise 1.05x, where GEMMs alone slow 1.19x).
// The executor's own calls, Llama-3.1-8B-shaped, at four attention shares: after a 500 ms pause,
// ~1.5 s of rounds of G GEMMs (qkv at M = 4096, weights rotating), A prefill attentions (causal 8192
// over 8192, 32 / 8 heads, head dim 128: cuDNN where it runs, as the executor) and one SiLU-mul of
// 4096 x 14336; each call between events. ~8 s. The arithmetic is profiler/common/power_throttle.cpp.
// The MoE dispatch's mixes (session 20) run the same rounds with the executor's routed-expert call
// (moe_expert_gemm on gate_up then down) as the GEMM class, one model at a time.
#include <algorithm>
#include <array>
#include <chrono>
#include <functional>
#include <optional>
#include <thread>
#include <vector>

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "planner/model/routing_model.hpp"
#include "profiler/common/power_throttle.hpp"
#include "profiler/gpu/cuda_check.hpp"
#include "profiler/gpu/gemm.hpp"
#include "profiler/gpu/gemm_quant.hpp"
#include "profiler/gpu/raii.hpp"
#include "profiler/gpu/timing.hpp"
#include "profiler/kernels/attention.hpp"
#include "profiler/kernels/elementwise.hpp"
#include "profiler/kernels/moe_expert_gemm.hpp"
#include "profiler/kernels/moe_route.hpp"
#include "profiler/measure/pacing.hpp"

namespace peerplan::profiler {
namespace {

// The rounds every mix shares: prefill attention (causal 8192 over 8192, 32 / 8 heads, head dim 128)
// and a SiLU-mul of 4096 x 14336, beside the caller's GEMM-class call, on one stream.
class MixRig {
 public:
  static constexpr int heads = 32, kv = 8, hd = 128, ctx = 8192;
  static constexpr int64_t et = 4096, inter = 14336;
  explicit MixRig(int gpu)
      : gpu_(gpu), s_(gpu), kc_(gpu, size_t(ctx) * kv * hd * 2), vc_(gpu, size_t(ctx) * kv * hd * 2),
        q_(gpu, size_t(ctx) * heads * hd * 2), o_(gpu, size_t(ctx) * heads * hd * 2),
        ein_(gpu, size_t(et * 2 * inter) * 2), eout_(gpu, size_t(et * inter) * 2), meta_(gpu, sizeof(int) * 4) {
    gpu::launch_fill_bf16(kc_.get(), size_t(ctx) * kv * hd, 3, s_);
    gpu::launch_fill_bf16(vc_.get(), size_t(ctx) * kv * hd, 4, s_);
    gpu::launch_fill_bf16(q_.get(), size_t(ctx) * heads * hd, 5, s_);
    gpu::launch_fill_bf16(ein_.get(), size_t(et * 2 * inter), 6, s_);
    const int host_meta[4] = {0, 0, ctx, ctx};  // slot 0; q_start {0, ctx}; seq_len ctx
    CUDA_CHECK(cudaMemcpy(meta_.get(), host_meta, sizeof host_meta, cudaMemcpyHostToDevice));
    a_.q = q_.as<__nv_bfloat16>();
    a_.q_row_stride = int64_t(heads) * hd;
    a_.k_cache = kc_.as<__nv_bfloat16>();
    a_.v_cache = vc_.as<__nv_bfloat16>();
    a_.slots = meta_.as<int>();
    a_.q_start = meta_.as<int>() + 1;
    a_.seq_lens = meta_.as<int>() + 3;
    a_.out = o_.as<__nv_bfloat16>();
    a_.num_seqs = 1, a_.max_q_len = ctx;
    a_.heads = heads, a_.kv_heads = kv, a_.head_dim = hd, a_.max_ctx = ctx;
  }
  gpu::Stream& stream() { return s_; }
  void attention() { kernels::prefill_attention(a_, s_); }
  void elementwise() { kernels::silu_mul(ein_.as<__nv_bfloat16>(), eout_.as<__nv_bfloat16>(), et, inter, s_); }

  // For each (G, A) in `rounds` (A < 0: as many attentions as take about the time of 4 GEMM-class
  // calls): after a 500 ms pause, ~1.5 s of rounds of G calls of `gemm`, A attentions and one
  // SiLU-mul, each call between events; each mix's factors (analyse_throttle_mix), completed.
  std::vector<ThrottleMix> run(const std::function<void(int)>& gemm, const std::vector<std::pair<int, int>>& rounds) {
    gemm(0), attention(), elementwise();  // algorithm choice, cuDNN graph build, module loads: outside the timing
    s_.synchronize();
    auto time_one = [&](auto&& f) {
      gpu::Event e0(gpu_), e1(gpu_);
      e0.record(s_);
      for (int i = 0; i < 4; ++i) f(i);
      e1.record(s_);
      e1.synchronize();
      return std::max(e1.seconds_since(e0) / 4, 1e-6);
    };
    const double g_s = time_one([&](int i) { gemm(i); }), a_s = time_one([&](int) { attention(); });
    const int a_for_half = std::max(1, int(std::lround(g_s * 4 / a_s)));
    std::vector<ThrottleMix> mixes;
    std::vector<std::array<bool, 3>> ran;
    for (auto [G, A] : rounds) {
      if (A < 0) A = a_for_half;
      const double round_s = G * g_s + A * a_s;
      const int n_rounds = int(std::clamp(1.5 / round_s, 20.0, 20000.0));
      std::vector<MixClass> cls;
      for (int r = 0; r < n_rounds; ++r) {
        for (int i = 0; i < G; ++i) cls.push_back(MixClass::Gemm);
        for (int i = 0; i < A; ++i) cls.push_back(MixClass::Attention);
        cls.push_back(MixClass::Elementwise);
      }
      std::vector<gpu::Event> ev;
      ev.reserve(cls.size() + 1);
      for (size_t i = 0; i <= cls.size(); ++i) ev.emplace_back(gpu_);
      std::this_thread::sleep_for(std::chrono::milliseconds(500));  // the pause: the clock back at boost
      ev[0].record(s_);
      for (size_t i = 0; i < cls.size(); ++i) {
        if (cls[i] == MixClass::Gemm) gemm(int(i));
        else if (cls[i] == MixClass::Attention) attention();
        else elementwise();
        ev[i + 1].record(s_);
      }
      s_.synchronize();
      std::vector<MixCall> calls;
      calls.reserve(cls.size());
      for (size_t i = 0; i < cls.size(); ++i)
        calls.push_back({cls[i], ev[i].seconds_since(ev[0]), ev[i + 1].seconds_since(ev[i])});
      mixes.push_back(analyse_throttle_mix(calls));
      ran.push_back({G > 0, A > 0, true});
    }
    return complete_mixes(mixes, ran);
  }

 private:
  int gpu_;
  gpu::Stream s_;
  gpu::DeviceBuffer kc_, vc_, q_, o_, ein_, eout_, meta_;
  kernels::PrefillAttention a_;
};

}  // namespace

std::vector<ThrottleMix> measure_throttle_mixes(int gpu) {
  constexpr int64_t m = 4096, n = 6144, k = 4096, kCopies = 4;
  gpu::ScopedDevice dev(gpu);
  MixRig rig(gpu);
  gpu::DeviceBuffer x(gpu, size_t(m * k) * 2), w(gpu, size_t(kCopies * n * k) * 2), y(gpu, size_t(m * n) * 2);
  gpu::launch_fill_bf16(x.get(), size_t(m * k), 1, rig.stream());
  gpu::launch_fill_bf16(w.get(), size_t(kCopies * n * k), 2, rig.stream());
  gpu::GemmRunner runner(gpu);
  auto gemm = [&](int i) {
    runner.run(x.get(), static_cast<const char*>(w.get()) + size_t(i % kCopies) * size_t(n * k) * 2, y.get(), m, n, k,
               rig.stream());
  };
  // (GEMMs, attentions) a round: attention shares ~0, ~1/2, ~4/5, 1 on an H200 (0.25 / 1.0 ms a call).
  return rig.run(gemm, {{4, 0}, {4, -1}, {1, -1}, {0, 1}});
}

namespace {

// One model's dispatch mixes at `tokens` routed tokens a call (see measure_grouped_throttle).
GroupedThrottle time_dispatch_mixes(int gpu, const ModelConfig& c, int64_t tokens, DType dtype) {
  namespace kn = peerplan::kernels;
  const int64_t E = c.experts, topk = c.experts_per_token, h = c.hidden, f = c.expert_intermediate;
  const int64_t rows = tokens * topk;
  MixRig rig(gpu);
  gpu::Stream& st = rig.stream();
  const bool bf16 = dtype == DType::BF16;
  // Quantized experts as the executor holds them (engine_moe.cpp): every expert as one [E x n][k] weight.
  std::optional<gpu::QuantWeight> qgu, qd;
  if (!bf16) {
    const auto scaling = dtype == DType::FP8_E4M3 ? gpu::Fp8Scaling::PerChannel : gpu::Fp8Scaling::PerTensor;
    qgu = gpu::make_random_quant_weight(gpu, dtype, scaling, E * 2 * f, h, 21, st.get());
    qd = gpu::make_random_quant_weight(gpu, dtype, scaling, E * h, f, 22, st.get());
  }
  gpu::DeviceBuffer wgu(gpu, bf16 ? size_t(E * 2 * f * h) * 2 : 16), wd(gpu, bf16 ? size_t(E * h * f) * 2 : 16);
  gpu::DeviceBuffer x(gpu, size_t(tokens * h) * 2), xg(gpu, size_t(rows * h) * 2);
  gpu::DeviceBuffer ygu(gpu, size_t(rows * 2 * f) * 2), act(gpu, size_t(rows * f) * 2), yd(gpu, size_t(rows * h) * 2);
  gpu::DeviceBuffer logits(gpu, size_t(tokens * E) * 2);
  gpu::DeviceBuffer rbuf(gpu, size_t(kn::moe_route_buffer_ints(tokens, int(topk), int(E))) * 4);
  if (bf16) {
    gpu::launch_fill_bf16(wgu.get(), size_t(E * 2 * f * h), 21, st);
    gpu::launch_fill_bf16(wd.get(), size_t(E * h * f), 22, st);
  }
  gpu::launch_fill_bf16(x.get(), size_t(tokens * h), 23, st);
  gpu::launch_fill_bf16(act.get(), size_t(rows * f), 24, st);
  gpu::launch_fill_bf16(logits.get(), size_t(tokens * E), 25, st);
  const kn::MoeRouting r = kn::moe_routing_view(rbuf.as<int>(), tokens, int(topk), int(E));
  const routing::RoutingSpec spec;  // uniform, the default seed: what the compiler counts by default
  const routing::GroupLoad load =
      routing::group_load(routing::expert_counts(spec, E, topk, tokens, 0), 0, E);
  kn::MoeRouteArgs ra;
  ra.logits = logits.as<__nv_bfloat16>();
  ra.tokens = tokens, ra.experts = int(E), ra.topk = int(topk);
  ra.expert_first = 0, ra.expert_count = int(E);
  ra.seed = spec.seed, ra.layer = 0;
  kn::moe_route(ra, r, st);  // one routing: every call below reads it
  gpu::GemmRunner cublas(gpu);
  gpu::QuantGemmRunner qcublas(gpu);
  auto dispatch = [&](bool gate_up) {  // the executor's call (engine_moe.cpp), as grouped_gemm.cpp times it
    kn::MoeExpertGemmArgs d;
    kn::MoeGemmArgs& a = d.gemm;
    a.x = gate_up ? x.as<__nv_bfloat16>() : act.as<__nv_bfloat16>();
    a.gather = gate_up ? r.token_of_row : nullptr;
    if (bf16) {
      a.w = (gate_up ? wgu : wd).as<__nv_bfloat16>();
    } else {
      const gpu::QuantWeight& q = gate_up ? *qgu : *qd;
      if (dtype == DType::FP8_E4M3) a.w_fp8 = q.codes.as<uint8_t>(), a.w_scale = q.scales.as<float>();
      else if (dtype == DType::INT8) a.w_int8 = q.codes.as<int8_t>(), a.w_scale = q.scales.as<float>();
      else if (dtype == DType::INT4) a.w_int4 = q.codes.as<uint32_t>(), a.w_int4_scale = q.scales.as<__nv_bfloat16>();
      else a.w_mxfp4 = q.codes.as<uint32_t>(), a.w_mxfp4_scale = q.scales.as<uint8_t>();
    }
    a.y = (gate_up ? ygu : yd).as<__nv_bfloat16>();
    a.n = gate_up ? 2 * f : h, a.k = gate_up ? h : f;
    a.entries = rows, a.max_rows = load.max_rows, a.touched = load.touched;
    d.rows = load.rows, d.x_rows = gate_up ? tokens : 0;
    d.allow_cublas = true;  // an eager prefill iteration's call
    d.cublas = &cublas;
    d.qcublas = &qcublas;
    if (gate_up) d.gathered = xg.as<__nv_bfloat16>(), d.gathered_cap = rows * h;
    kn::moe_expert_gemm(d, r, st);
  };
  auto call = [&](int) { dispatch(true), dispatch(false); };
  GroupedThrottle g;
  g.model = c.name, g.hidden = h, g.intermediate = f, g.experts = E, g.topk = topk, g.tokens = tokens;
  g.dtype = dtype_name(dtype);
  g.mixes = rig.run(call, {{4, 0}, {4, -1}, {1, -1}});
  return g;
}

}  // namespace

std::vector<GroupedThrottle> measure_grouped_throttle(int gpu, const std::vector<ModelConfig>& models,
                                                      const std::vector<int64_t>& token_counts,
                                                      const std::vector<std::vector<DType>>& formats) {
  std::vector<GroupedThrottle> out;
  gpu::ScopedDevice dev(gpu);
  for (size_t i = 0; i < models.size(); ++i) {
    const ModelConfig& c = models[i];
    if (!c.is_moe()) continue;
    const std::vector<DType> fs = i < formats.size() && !formats[i].empty() ? formats[i] : std::vector<DType>{DType::BF16};
    for (const DType dt : fs)
      for (const int64_t tokens : token_counts) out.push_back(time_dispatch_mixes(gpu, c, tokens, dt));
  }
  return out;
}

}  // namespace peerplan::profiler
