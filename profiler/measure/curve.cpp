#include "profiler/measure/curve.hpp"

#include "profiler/common/sweep.hpp"

namespace peerplan::profiler {

std::vector<CurvePoint> sweep_transfer(Context& ctx, gpu::BlockingGate& gate, const SweepSpec& spec,
                                       double from, double to) {
  std::vector<CurvePoint> pts;
  for (size_t i = 0; i < spec.sizes.size(); ++i) {
    int64_t bytes = spec.sizes[i];
    ctx.progress.update(from + (to - from) * double(i) / double(spec.sizes.size()), spec.label + " " + format_size(bytes));
    int reps = reps_for(bytes, spec.expected_gbps, spec.region_target_s, spec.max_reps);
    auto region = [&] {
      double t = gpu::time_region(spec.gated ? &gate : nullptr, *spec.timing, spec.others, [&] {
        for (int r = 0; r < reps; ++r) spec.enqueue(bytes);
      }, spec.before_release);
      return spec.combine ? spec.combine(t) : t;
    };
    for (int w = 0; w < ctx.plan.warmup; ++w) region();
    std::vector<double> samples;
    samples.reserve(size_t(ctx.plan.samples));
    for (int s = 0; s < ctx.plan.samples; ++s) samples.push_back(region() / reps);
    if (spec.verify) {
      size_t bad = spec.verify(bytes);
      if (bad)
        throw RuntimeError(spec.label + ": data check failed after the timed loop at " + format_size(bytes) + ": " +
                           std::to_string(bad) + " words wrong (the path loses data; its bandwidth is meaningless)");
    }
    pts.push_back({bytes, compute_stats(std::move(samples))});
  }
  return pts;
}

PatternPair::PatternPair(int s, int d, size_t bytes, uint32_t sd) : src(s, bytes), dst(d, bytes), seed(sd) {
  {
    gpu::ScopedDevice g(s);
    gpu::launch_fill_pattern(src.as<uint32_t>(), bytes / 4, seed, nullptr);
    CUDA_CHECK(cudaDeviceSynchronize());
  }
  gpu::ScopedDevice g(d);
  CUDA_CHECK(cudaMemset(dst.get(), 0, bytes));
  CUDA_CHECK(cudaDeviceSynchronize());
}

size_t PatternPair::errors(int64_t bytes) const {
  return gpu::count_pattern_errors(dst.get(), dst.device(), size_t(bytes) / 4, seed);
}

}  // namespace peerplan::profiler
