// GEMM times of the models' shapes (or of the shapes a profile lacks: shape_timing.hpp) through the
// executor's own calls, on GPU 0 (the GPUs of one host are the same part; other GPUs' figures
// would repeat these): bf16 (gpu/gemm.hpp) and, per
// --dtypes, quantized weights (gpu/gemm_quant.hpp: fp8 per-tensor with x quantized first, int8,
// int4 W4A16), each row tagged with its dtype. Inputs are pseudo-random, not zeros (zeros run
// faster on tensor cores than real weights).
#include <algorithm>
#include <cmath>
#include <functional>
#include <set>

#include <fmt/format.h>

#include "planner/compile/graph_batch.hpp"
#include "planner/core/files.hpp"
#include "planner/model/model_config.hpp"
#include "profiler/common/gemm_shapes.hpp"
#include "profiler/gpu/cuda_check.hpp"
#include "profiler/gpu/gemm.hpp"
#include "profiler/gpu/gemm_quant.hpp"
#include "profiler/common/profile_models.hpp"
#include "profiler/common/model_shapes.hpp"
#include "profiler/measure/curve.hpp"
#include "profiler/measure/pacing.hpp"
#include "profiler/measure/shape_timing.hpp"

namespace peerplan::profiler {

// Rows up to kGraphTimedMaxRows (planner/compile/graph_batch.hpp) are timed in a graph over rotating
// weights, as decode steps run; above it eagerly, as prefill runs (time_gemm_shapes).


void time_gemm_shapes(Context& ctx, const std::set<GemmShapeKey>& keys, const std::vector<int64_t>& tokens) {
  // Formats in the profiler's order; within one, plain GEMMs (m, n, k) ascending, as a full profile
  // always ran, then the strided-batched ones (MLA's absorbed products) by batch.
  struct Job {
    std::string dtype;
    GemmProblem p;
    int64_t batch = 1;  // products per strided-batched call (GemmShapeKey::batch)
  };
  std::vector<Job> jobs;
  std::vector<std::string> skipped, dtypes;
  for (const std::string& d : profiler_gemm_dtypes()) {
    std::set<std::pair<int64_t, GemmProblem>> ps;  // (batch, problem)
    for (const GemmShapeKey& key : keys) {
      if (key.dtype != d) continue;
      // Batched calls run in bf16 only (the executor's quantized runner refuses them, engine_quant.cpp).
      if (key.batch != 1 && d != "bf16") {
        skipped.push_back(fmt::format("{} n={} k={} batch {}: the executor runs strided-batched GEMMs in bf16 only",
                                      key.dtype, key.n, key.k, key.batch));
        continue;
      }
      for (int64_t t : tokens) ps.insert({std::max<int64_t>(1, key.batch), {t, key.n, key.k}});
    }
    if (!ps.empty()) dtypes.push_back(d);
    for (const auto& [b, p] : ps) jobs.push_back({d, p, b});
  }
  for (const GemmShapeKey& key : keys)
    if (std::find(profiler_gemm_dtypes().begin(), profiler_gemm_dtypes().end(), key.dtype) == profiler_gemm_dtypes().end())
      skipped.push_back(fmt::format("{} n={} k={}: the profiler times bf16, fp8, int8 and int4 GEMMs", key.dtype, key.n, key.k));
  int64_t max_mk = 0, max_nk = 0, max_mn = 0;  // elements, over a batched call's products together
  for (const Job& j : jobs) {
    max_mk = std::max(max_mk, j.p.m * j.p.k * j.batch);
    max_nk = std::max(max_nk, j.p.n * j.p.k * j.batch);
    max_mn = std::max(max_mn, j.p.m * j.p.n * j.batch);
  }
  const int g = ctx.measured_gpus().front();  // GPU 0, or an MPI rank's own GPU
  int max_copies = 1;  // quantized weight copies of the largest rotation
  if (!jobs.empty()) {
    gpu::ScopedDevice dev(g);
    int l2_bytes = 0;
    CUDA_CHECK(cudaDeviceGetAttribute(&l2_bytes, cudaDevAttrL2CacheSize, g));
    // bf16 weights: one pool holding the largest weight and at least 4x the L2, cut into copies of
    // the current weight at decode sizes (below), its start the one weight of larger M.
    const size_t pool_elems = std::max<size_t>(size_t(max_nk), (size_t(4) * size_t(std::max(l2_bytes, 1)) >> 1) + 4096);
    gpu::DeviceBuffer x(g, size_t(max_mk) * 2), w(g, pool_elems * 2), y(g, size_t(max_mn) * 2);
    gpu::Stream s(g);
    gpu::launch_fill_bf16(x.get(), size_t(max_mk), 1, s);
    gpu::launch_fill_bf16(w.get(), pool_elems, 2, s);
    s.synchronize();
    gpu::GemmRunner runner(g);
    gpu::QuantGemmRunner qrunner(g);
    // Quantized rows are timed as the executor runs them (decode steps replay CUDA graphs, and
    // every layer's weight comes from HBM): the calls of a region are one CUDA graph, and they
    // rotate over weight copies that together exceed 4x the L2. Eager launches of one weight
    // (the former timing) measured W4A16 at M = 1 slower than M = 2 of the same kernel and an 8B
    // W4A16 decode 10 % faster in the executor's graphs than those rows predicted (H200, issue 15).
    // That holds for decode sizes only: above M = 256 (the largest CUDA-graph batch, prefill and
    // mixed iterations, which the executor launches eagerly) rows keep the eager timing, which the
    // graph timing undercut by 10-17 % at M = 2048 for FP8 (compute-bound: the eager path's own
    // cost) and made prefill iterations run 1.063x their price (H200, 2026-12-04, session 8 C).
    // bf16 rows at decode sizes are timed the same way (copies cut from one pool). kGraphTimedMaxRows.
    std::vector<gpu::QuantWeight> qws;  // copies of the quantized weight of the current (dtype, n, k)
    gpu::BlockingGate gate;
    size_t step = 0;
    for (const Job& job : jobs) {
      const std::string& dname = job.dtype;
      const GemmProblem& p = job.p;
      const int64_t batch = job.batch;
      const std::string what = fmt::format("{} m={} n={} k={}{}", dname, p.m, p.n, p.k,
                                           batch != 1 ? fmt::format(" batch {}", batch) : std::string());
      ctx.progress.update(double(step++) / double(jobs.size()), what);
      const DType dt = parse_dtype(dname).value_or(DType::BF16);
      std::function<void()> call;
      try {
        if (dt == DType::BF16) {
          // batch > 1: the executor's call for MLA's absorbed products (engine_ops.cpp run_gemm: one
          // strided-batched GemmRunner::run, product e on x, w and y's e-th slice).
          call = [&] { runner.run(x.get(), w.get(), y.get(), p.m, p.n, p.k, s, batch); };
        } else {
          if (qws.empty() || qws[0].dtype != dt || qws[0].n != p.n || qws[0].k != p.k) {
            qws.clear();  // free the previous ones first
            const double b = double(gpu::quant_weight_bytes(dt, gpu::Fp8Scaling::PerTensor, p.n, p.k));
            const int copies = int(std::clamp(std::ceil(4.0 * std::max(l2_bytes, 1) / b), 1.0, 64.0));
            for (int c = 0; c < copies; ++c)
              qws.push_back(gpu::make_random_quant_weight(g, dt, gpu::Fp8Scaling::PerTensor, p.n, p.k, 2 + c, s));
            max_copies = std::max(max_copies, copies);
          }
          call = [&] { qrunner.run(x.get(), qws[0], y.get(), p.m, s); };
        }
        call();  // algorithm lookup and scratch outside the timed region (and outside any capture)
        s.synchronize();
      } catch (const std::exception& e) {  // a format this GPU or shape cannot run: noted, not fatal
        skipped.push_back(fmt::format("{}: {}", what, e.what()));
        continue;
      }
      // Quantized calls at small m are ~2-3 kernels: time several per region as bf16 does.
      double expect_s = 2.0 * double(p.m) * double(p.n) * double(p.k) * double(batch) / 600e12 + 3e-6;
      int reps = std::clamp(int(200e-6 / expect_s), 1, 64);
      std::function<double()> region;
      gpu::CapturedGraph graph;
      if (p.m > kGraphTimedMaxRows) {
        region = [&] { return gpu::time_region(&gate, s, {}, [&] { for (int r = 0; r < reps; ++r) call(); }); };
      } else if (dt == DType::BF16) {
        // Copies of the weight in the pool, 256-byte aligned: a weight that fits the L2 (Qwen1.5-MoE's
        // qkv, o and shared expert, 8-46 MB) was L2-hot when relaunched alone, below its bytes over HBM
        // (shared.gate_up 10.0 us for 46 MB) and Qwen's decode ran 1.12x its price (H200, session 8 D).
        // Up to 1024 copies: at 64, a router's weight (Qwen1.5-MoE: 60 x 2048, 0.25 MB) rotated over
        // 16 MB and stayed L2-resident, while in a step the layers between two calls evict it.
        // A batched call's weight is its `batch` products' [n, k] slices together (w + e*n*k).
        const size_t stride = (size_t(p.n * p.k * batch) * 2 + 255) / 256 * 256;
        const int copies = int(std::clamp<size_t>(pool_elems * 2 / stride, 1, 1024));
        max_copies = std::max(max_copies, copies);
        reps = copies * ((reps + copies - 1) / copies);
        const char* base = static_cast<const char*>(w.get());
        try {
          graph.capture(s, [&] {
            for (int r = 0; r < reps; ++r)
              runner.run(x.get(), base + size_t(r % copies) * stride, y.get(), p.m, p.n, p.k, s, batch);
          });
        } catch (const std::exception& e) {
          skipped.push_back(fmt::format("{}: CUDA graph: {}", what, e.what()));
          continue;
        }
        region = [&] { return gpu::time_region(&gate, s, {}, [&] { graph.launch(s); }); };
      } else {
        const int copies = int(qws.size());
        reps = copies * ((reps + copies - 1) / copies);  // every copy equally often
        try {
          graph.capture(s, [&] {
            for (int r = 0; r < reps; ++r) qrunner.run(x.get(), qws[size_t(r % copies)], y.get(), p.m, s);
          });
        } catch (const std::exception& e) {
          skipped.push_back(fmt::format("{} m={} n={} k={}: CUDA graph: {}", dname, p.m, p.n, p.k, e.what()));
          continue;
        }
        region = [&] { return gpu::time_region(&gate, s, {}, [&] { graph.launch(s); }); };
      }
      ctx.ms.gemms.push_back({g, p.m, p.n, p.k, dname, time_compute_samples(ctx, g, region, reps), batch});
    }
  }
  if (!skipped.empty())
    ctx.not_applicable("gemm (some dtypes/shapes)", fmt::format("{} not timed, first: {}", skipped.size(), skipped.front()));
  ctx.ms.extra["gemm"] = {{"gpu", g}, {"layout", "y[m,n] = x[m,k] W^T, W [n,k]; bf16, fp32 accumulate"},
                          {"call", "peerplan::gpu::GemmRunner::run (cuBLASLt, heuristic's first algorithm, 32 MiB workspace)"},
                          {"dtypes", dtypes},
                          {"batched_call", "rows with \"batch\": one strided-batched GemmRunner::run of `batch` products "
                                           "(MLA's absorbed q_absorb / v_absorb, as the executor runs them; bf16 only), "
                                           "timed as bf16 rows are, the time of the whole call"},
                          {"quantized_call", "peerplan::gpu::QuantGemmRunner::run: fp8 e4m3 per-tensor scales (x quantized "
                                             "by a kernel, timed), int8 W8A8 (per-token x, per-channel W, int32 epilogue), "
                                             "int4 W4A16 group 128 (GEMV kernel m <= 64, dequantise + cuBLASLt above)"},
                          {"quantized_timing", fmt::format("m <= {} (every dtype): each region one CUDA graph of its calls, weights rotating "
                                                           "over copies that together exceed 4x the L2 (up to {} copies); "
                                                           "larger m: eager calls of one weight, as prefill runs",
                                                           kGraphTimedMaxRows, max_copies)},
                          {"pacing", fmt::format("duty {:g}: after each timed region the GPU idled {} (--duty); each row's "
                                                 "sm_mhz is the median SM clock (NVML) as its samples ended",
                                                 ctx.plan.duty, ctx.plan.duty < 1 ? "region x (1 / duty - 1), at most 50 ms" : "not at all")}};
}

void measure_gemm(Context& ctx) {
  const auto models = load_profile_models(ctx.opts.models);
  const ShapeSet shapes = model_shape_set(models, ctx.gpus(), ctx.opts.dtypes);
  if (shapes.gemms.empty()) {
    ctx.not_applicable("gemm", "no GEMM shapes (no models given)");
    return;
  }
  time_gemm_shapes(ctx, shapes.gemms, ctx.plan.tokens);
  // After the table, not before: the table's first rows should not follow 1.5 s at the power cap.
  ctx.progress.update(1.0, "power throttle (1.5 s of one GEMM)");
  ctx.ms.power_throttle = measure_power_throttle(ctx.measured_gpus().front());
  // A paced profile's prices are at boost: the serving simulation slows each class by its factor at
  // the iteration's mix (planner/sim/power_state.hpp). Back-to-back tables need none of it.
  if (ctx.plan.duty < 1 && ctx.ms.power_throttle->factor > 1) {
    ctx.progress.update(1.0, "power throttle by class (four mixes of GEMM, attention, elementwise, ~8 s)");
    ctx.ms.power_throttle->mixes = measure_throttle_mixes(ctx.measured_gpus().front());
  }
  nlohmann::json names = nlohmann::json::array();
  for (const auto& m : models) names.push_back(m.name);
  ctx.ms.extra["gemm"]["models"] = names;
}

}  // namespace peerplan::profiler
