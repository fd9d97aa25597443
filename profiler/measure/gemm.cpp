// bf16 GEMM times of the models' shapes through the executor's own call (gpu/gemm.hpp), on GPU 0
// (the GPUs of one host are the same part; other GPUs' figures would repeat these). Inputs are
// pseudo-random, not zeros (zeros run faster on tensor cores than real weights).
#include <algorithm>

#include <fmt/format.h>

#include "planner/core/files.hpp"
#include "planner/model/model_config.hpp"
#include "profiler/common/gemm_shapes.hpp"
#include "profiler/gpu/gemm.hpp"
#include "profiler/common/profile_models.hpp"
#include "profiler/measure/curve.hpp"

namespace peerplan::profiler {


void measure_gemm(Context& ctx) {
  auto models = load_profile_models(ctx.opts.models);
  auto problems = gemm_problems(models, ctx.gpus(), ctx.plan.tokens);
  if (problems.empty()) {
    ctx.not_applicable("gemm", "no GEMM shapes (no models given)");
    return;
  }
  int64_t max_mk = 0, max_nk = 0, max_mn = 0;
  for (const auto& p : problems) {
    max_mk = std::max(max_mk, p.m * p.k);
    max_nk = std::max(max_nk, p.n * p.k);
    max_mn = std::max(max_mn, p.m * p.n);
  }
  const int g = ctx.measured_gpus().front();  // GPU 0, or an MPI rank's own GPU
  gpu::ScopedDevice dev(g);
  gpu::DeviceBuffer x(g, size_t(max_mk) * 2), w(g, size_t(max_nk) * 2), y(g, size_t(max_mn) * 2);
  gpu::Stream s(g);
  gpu::launch_fill_bf16(x.get(), size_t(max_mk), 1, s);
  gpu::launch_fill_bf16(w.get(), size_t(max_nk), 2, s);
  s.synchronize();
  gpu::GemmRunner runner(g);
  gpu::BlockingGate gate;
  for (size_t i = 0; i < problems.size(); ++i) {
    const auto& p = problems[i];
    ctx.progress.update(double(i) / problems.size(), fmt::format("m={} n={} k={}", p.m, p.n, p.k));
    double expect_s = 2.0 * double(p.m) * double(p.n) * double(p.k) / 600e12 + 3e-6;
    int reps = std::clamp(int(200e-6 / expect_s), 1, 64);
    auto region = [&] {
      return gpu::time_region(&gate, s, {}, [&] { for (int r = 0; r < reps; ++r) runner.run(x.get(), w.get(), y.get(), p.m, p.n, p.k, s); });
    };
    runner.run(x.get(), w.get(), y.get(), p.m, p.n, p.k, s);  // algorithm lookup outside the timed region
    s.synchronize();
    for (int r = 0; r < ctx.plan.warmup; ++r) region();
    std::vector<double> t;
    for (int r = 0; r < ctx.plan.samples; ++r) t.push_back(region() / reps);
    ctx.ms.gemms.push_back({g, p.m, p.n, p.k, "bf16", compute_stats(std::move(t))});
  }
  nlohmann::json names = nlohmann::json::array();
  for (const auto& m : models) names.push_back(m.name);
  ctx.ms.extra["gemm"] = {{"gpu", g}, {"models", names}, {"layout", "y[m,n] = x[m,k] W^T, W [n,k]; bf16, fp32 accumulate"},
                          {"call", "peerplan::gpu::GemmRunner::run (cuBLASLt, heuristic's first algorithm, 32 MiB workspace)"}};
}

}  // namespace peerplan::profiler
