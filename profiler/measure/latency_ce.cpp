// Copy-engine latency: one 4-byte cudaMemcpyPeerAsync per gated region (so the CPU's enqueue
// cost is excluded and the copy engine's start-up and the link's round trip are what is timed).
#include <algorithm>

#include "profiler/measure/curve.hpp"

namespace peerplan::profiler {

void measure_latency_ce(Context& ctx) {
  auto pairs = ctx.usable_pairs();
  if (pairs.empty()) {
    ctx.not_applicable("latency_ce", ctx.gpus() < 2 ? "one GPU: no pairs" : "no pair has usable peer access");
    return;
  }
  gpu::BlockingGate gate;
  int samples = std::max(ctx.plan.samples, 50);  // cheap: take more for a stable p99
  for (size_t p = 0; p < pairs.size(); ++p) {
    auto [src, dst] = pairs[p];
    ctx.progress.update(double(p) / pairs.size(), "gpu" + std::to_string(src) + "->gpu" + std::to_string(dst));
    PatternPair buf(src, dst, 4096, 0x99000000u + uint32_t(src * 16 + dst));
    gpu::Stream s(src);
    auto one = [&] {
      return gpu::time_region(&gate, s, {}, [&] {
        CUDA_CHECK(cudaMemcpyPeerAsync(buf.dst.get(), dst, buf.src.get(), src, 4, s));
      });
    };
    for (int w = 0; w < std::max(ctx.plan.warmup, 3); ++w) one();
    std::vector<double> t;
    for (int i = 0; i < samples; ++i) t.push_back(one());
    if (buf.errors(4)) throw RuntimeError("latency_ce: the 4-byte peer copy did not arrive intact");
    ctx.ms.latencies.push_back({src, dst, "ce_small", compute_stats(t)});
  }
}

}  // namespace peerplan::profiler
