// GEMM times of the models' shapes (or of the shapes a profile lacks: shape_timing.hpp) through the
// executor's own calls, on GPU 0 (the GPUs of one host are the same part; other GPUs' figures
// would repeat these): bf16 (gpu/gemm.hpp) and, per
// --dtypes, quantized weights (gpu/gemm_quant.hpp: fp8 per-tensor with x quantized first, int8,
// int4 W4A16), each row tagged with its dtype. Inputs are pseudo-random, not zeros (zeros run
// faster on tensor cores than real weights).
#include <algorithm>
#include <functional>
#include <set>

#include <fmt/format.h>

#include "planner/core/files.hpp"
#include "planner/model/model_config.hpp"
#include "profiler/common/gemm_shapes.hpp"
#include "profiler/gpu/gemm.hpp"
#include "profiler/gpu/gemm_quant.hpp"
#include "profiler/common/profile_models.hpp"
#include "profiler/common/model_shapes.hpp"
#include "profiler/measure/curve.hpp"
#include "profiler/measure/shape_timing.hpp"

namespace peerplan::profiler {


void time_gemm_shapes(Context& ctx, const std::set<GemmShapeKey>& keys, const std::vector<int64_t>& tokens) {
  // Formats in the profiler's order; within one, (m, n, k) ascending, as a full profile always ran.
  std::vector<std::pair<std::string, GemmProblem>> jobs;
  std::vector<std::string> skipped, dtypes;
  for (const std::string& d : profiler_gemm_dtypes()) {
    std::set<GemmProblem> ps;
    for (const GemmShapeKey& key : keys)
      if (key.dtype == d)
        for (int64_t t : tokens) ps.insert({t, key.n, key.k});
    if (!ps.empty()) dtypes.push_back(d);
    for (const GemmProblem& p : ps) jobs.push_back({d, p});
  }
  for (const GemmShapeKey& key : keys)
    if (std::find(profiler_gemm_dtypes().begin(), profiler_gemm_dtypes().end(), key.dtype) == profiler_gemm_dtypes().end())
      skipped.push_back(fmt::format("{} n={} k={}: the profiler times bf16, fp8, int8 and int4 GEMMs", key.dtype, key.n, key.k));
  int64_t max_mk = 0, max_nk = 0, max_mn = 0;
  for (const auto& [d, p] : jobs) {
    max_mk = std::max(max_mk, p.m * p.k);
    max_nk = std::max(max_nk, p.n * p.k);
    max_mn = std::max(max_mn, p.m * p.n);
  }
  const int g = ctx.measured_gpus().front();  // GPU 0, or an MPI rank's own GPU
  if (!jobs.empty()) {
    gpu::ScopedDevice dev(g);
    gpu::DeviceBuffer x(g, size_t(max_mk) * 2), w(g, size_t(max_nk) * 2), y(g, size_t(max_mn) * 2);
    gpu::Stream s(g);
    gpu::launch_fill_bf16(x.get(), size_t(max_mk), 1, s);
    gpu::launch_fill_bf16(w.get(), size_t(max_nk), 2, s);
    s.synchronize();
    gpu::GemmRunner runner(g);
    gpu::QuantGemmRunner qrunner(g);
    gpu::QuantWeight qw;  // the quantized weight of the current (dtype, n, k)
    gpu::BlockingGate gate;
    size_t step = 0;
    for (const auto& [dname, p] : jobs) {
      ctx.progress.update(double(step++) / double(jobs.size()), fmt::format("{} m={} n={} k={}", dname, p.m, p.n, p.k));
      const DType dt = parse_dtype(dname).value_or(DType::BF16);
      std::function<void()> call;
      try {
        if (dt == DType::BF16) {
          call = [&] { runner.run(x.get(), w.get(), y.get(), p.m, p.n, p.k, s); };
        } else {
          if (!qw.codes.get() || qw.dtype != dt || qw.n != p.n || qw.k != p.k) {
            qw = gpu::QuantWeight{};  // free the previous one first
            qw = gpu::make_random_quant_weight(g, dt, gpu::Fp8Scaling::PerTensor, p.n, p.k, 2, s);
          }
          call = [&] { qrunner.run(x.get(), qw, y.get(), p.m, s); };
        }
        call();  // algorithm lookup and scratch outside the timed region
        s.synchronize();
      } catch (const std::exception& e) {  // a format this GPU or shape cannot run: noted, not fatal
        skipped.push_back(fmt::format("{} m={} n={} k={}: {}", dname, p.m, p.n, p.k, e.what()));
        continue;
      }
      // Quantized calls at small m are ~2-3 kernels: time several per region as bf16 does.
      double expect_s = 2.0 * double(p.m) * double(p.n) * double(p.k) / 600e12 + 3e-6;
      int reps = std::clamp(int(200e-6 / expect_s), 1, 64);
      auto region = [&] { return gpu::time_region(&gate, s, {}, [&] { for (int r = 0; r < reps; ++r) call(); }); };
      for (int r = 0; r < ctx.plan.warmup; ++r) region();
      std::vector<double> t;
      for (int r = 0; r < ctx.plan.samples; ++r) t.push_back(region() / reps);
      ctx.ms.gemms.push_back({g, p.m, p.n, p.k, dname, compute_stats(std::move(t))});
    }
  }
  if (!skipped.empty())
    ctx.not_applicable("gemm (some dtypes/shapes)", fmt::format("{} not timed, first: {}", skipped.size(), skipped.front()));
  ctx.ms.extra["gemm"] = {{"gpu", g}, {"layout", "y[m,n] = x[m,k] W^T, W [n,k]; bf16, fp32 accumulate"},
                          {"call", "peerplan::gpu::GemmRunner::run (cuBLASLt, heuristic's first algorithm, 32 MiB workspace)"},
                          {"dtypes", dtypes},
                          {"quantized_call", "peerplan::gpu::QuantGemmRunner::run: fp8 e4m3 per-tensor scales (x quantized "
                                             "by a kernel, timed), int8 W8A8 (per-token x, per-channel W, int32 epilogue), "
                                             "int4 W4A16 group 128 (GEMV kernel m <= 64, dequantise + cuBLASLt above)"}};
}

void measure_gemm(Context& ctx) {
  const auto models = load_profile_models(ctx.opts.models);
  const ShapeSet shapes = model_shape_set(models, ctx.gpus(), ctx.opts.dtypes);
  if (shapes.gemms.empty()) {
    ctx.not_applicable("gemm", "no GEMM shapes (no models given)");
    return;
  }
  time_gemm_shapes(ctx, shapes.gemms, ctx.plan.tokens);
  nlohmann::json names = nlohmann::json::array();
  for (const auto& m : models) names.push_back(m.name);
  ctx.ms.extra["gemm"]["models"] = names;
}

}  // namespace peerplan::profiler
