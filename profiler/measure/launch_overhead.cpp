// Kernel-launch overhead of each GPU, three figures:
//  back_to_back: wall time per launch of 2000 empty kernels launched back to back then synced
//    (the rate one CPU thread can drive a GPU at: what a decode step of many small kernels pays);
//    stored as launch_overhead_us (GPU 0's; per-GPU figures in extra.launch).
//  gpu_gap: GPU time per empty kernel when all are queued behind the gate (no CPU in the way), as
//    the executor launches them: with programmatic dependent launch where it does (sm_90+, on unless
//    PEERPLAN_PDL=0), where a kernel starts under the previous one's tail (gpu_gap_pdl_us; the plain
//    launch's gap stays as gpu_gap_serial_us). The simulator's per-kernel floor (cost_model.cpp
//    min_kernel_s): a floor of the serial gap priced Qwen1.5-MoE's PDL decode 3 % high (session 19 C).
//  launch_sync: one launch + cudaStreamSynchronize (round trip), median.
//  fork_join (PDL GPUs): what a fork to a second stream and the join back add to a chain of PDL kernels inside
//    a CUDA graph, as the executor captures a MoE layer's shared experts (engine_graph.cpp fork_aux / join_aux):
//    the cross-stream edges are full dependencies, so the kernels after them start without the PDL overlap.
//  gemv_pair_progress (PDL GPUs): how far two of the executor's decode GEMVs (kernels::dense_gemv at one token, whose
//    blocks fill every SM) progress together on two streams against one after the other: (alone A + alone B) /
//    together; gemv_alone_GBps: one chain's weight bytes over its time alone. What the simulator's SM-slot capacity
//    for a MoE layer's shared branch beside its routed experts stands for (planner/cost/sm_slots.hpp; 2 would be full
//    overlap, 1 none). Recorded, not priced: 8 MiB matrices (one alone stays below the HBM rate, so the figure is the
//    SMs' rather than the HBM's) measured 1.54 on an H100 where the MoE layer's branches fit 1.2 (session 36 B).
//  gemv_prefetch_hide_us (PDL GPUs): how much of a norm runs under the next one-token GEMV's first weight loads, per
//    (norm, GEMV) pair in a graph against each chained alone; recorded beside the simulator's kGemvPrefetchHideS
//    (1 us, fitted on recorded steps; planner/cost/gemv_prefetch.hpp), not priced yet.
#include <algorithm>
#include <chrono>
#include <utility>
#include <vector>

#include "profiler/gpu/cuda_check.hpp"
#include "profiler/gpu/pdl_probe.hpp"
#include "profiler/kernels/dense_gemv.hpp"
#include "profiler/kernels/elementwise.hpp"
#include "profiler/measure/curve.hpp"

namespace peerplan::profiler {

namespace {

// Seconds a fork + join pair adds: a graph of kChain PDL empty kernels against the same chain with a one-kernel
// branch forked and joined after every kEvery-th kernel, each timed behind the gate.
double fork_join_seconds(gpu::BlockingGate& gate, const gpu::Stream& s, int g, int samples) {
  constexpr int kChain = 64, kEvery = 4, kPairs = kChain / kEvery;
  gpu::Stream aux(g);
  std::vector<gpu::Event> ev;  // the fork and join records: graph edges, outliving the capture
  for (int i = 0; i < 2 * kPairs; ++i) ev.emplace_back(g, cudaEventDisableTiming);
  gpu::CapturedGraph plain, forked;
  plain.capture(s, [&] {
    for (int i = 0; i < kChain; ++i) gpu::launch_empty_pdl(s);
  });
  forked.capture(s, [&] {
    int e = 0;
    for (int i = 0; i < kChain; ++i) {
      gpu::launch_empty_pdl(s);
      if (i % kEvery != kEvery - 1) continue;
      ev[size_t(e)].record(s);
      CUDA_CHECK(cudaStreamWaitEvent(aux, ev[size_t(e++)], 0));
      gpu::launch_empty_pdl(aux);
      ev[size_t(e)].record(aux);
      CUDA_CHECK(cudaStreamWaitEvent(s, ev[size_t(e++)], 0));
    }
  });
  plain.launch(s);
  forked.launch(s);
  s.synchronize();
  std::vector<double> d;
  for (int rep = 0; rep < samples; ++rep) {
    const double a = gpu::time_region(&gate, s, {}, [&] { plain.launch(s); });
    const double b = gpu::time_region(&gate, s, {}, [&] { forked.launch(s); });
    d.push_back((b - a) / kPairs);
  }
  return compute_stats(d).median;
}

// `count` zeroed weight matrices of `bytes` each, for a chain to rotate over so that every call streams from HBM;
// none where the GPU lacks them plus 1 GiB of headroom.
std::vector<gpu::DeviceBuffer> rotating_weights(int g, const gpu::Stream& s, size_t bytes, int count) {
  size_t free_b = 0, total_b = 0;
  CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
  std::vector<gpu::DeviceBuffer> w;
  if (free_b < size_t(count) * bytes + (size_t(1) << 30)) return w;
  for (int i = 0; i < count; ++i) {
    w.emplace_back(g, bytes);
    CUDA_CHECK(cudaMemsetAsync(w.back().get(), 0, bytes, s));
  }
  return w;
}

// Two chains of kCalls one-token GEMVs over 8 MiB weight matrices, each chain rotating over its own kCopies copies
// (256 MiB a chain: far past any L2, so every call streams from HBM, as a decode layer's weights do). Returns
// {progress, one chain's GB/s alone}; {0, 0} where the GPU lacks the memory.
std::pair<double, double> gemv_pair_progress(gpu::BlockingGate& gate, const gpu::Stream& s, int g, int samples) {
  constexpr int64_t kN = 2048, kK = 2048, kCopies = 32;
  constexpr int kCalls = 64;
  const size_t wbytes = size_t(kN * kK) * 2;
  const std::vector<gpu::DeviceBuffer> w = rotating_weights(g, s, wbytes, 2 * kCopies);
  if (w.empty()) return {0, 0};
  gpu::Stream aux(g);
  gpu::DeviceBuffer x(g, size_t(kK) * 2), ya(g, size_t(kN) * 2), yb(g, size_t(kN) * 2);
  CUDA_CHECK(cudaMemsetAsync(x.get(), 0, x.bytes(), s));
  auto chain = [&](int first, void* y, const gpu::Stream& st) {
    for (int i = 0; i < kCalls; ++i)
      kernels::dense_gemv(x.as<__nv_bfloat16>(), w[size_t(first + i % kCopies)].as<__nv_bfloat16>(),
                          static_cast<__nv_bfloat16*>(y), 1, kN, kK, st);
  };
  chain(0, ya.get(), s);  // warm-up
  chain(kCopies, yb.get(), aux);
  s.synchronize();
  aux.synchronize();
  std::vector<double> r, rate;
  for (int rep = 0; rep < samples; ++rep) {
    const double a = gpu::time_region(&gate, s, {}, [&] { chain(0, ya.get(), s); });
    const double b = gpu::time_region(&gate, s, {}, [&] { chain(kCopies, yb.get(), s); });
    const double both = gpu::time_region(&gate, s, {&aux}, [&] {
      chain(0, ya.get(), s);
      chain(kCopies, yb.get(), aux);
    });
    if (both > 0 && a > 0) r.push_back((a + b) / both), rate.push_back(double(kCalls) * double(wbytes) / a / 1e9);
  }
  if (r.empty()) return {0, 0};
  return {compute_stats(r).median, compute_stats(rate).median};
}

// Seconds of a norm that run under the next kernel's first weight loads when that kernel is the executor's decode
// GEMV (it loads before griddepcontrol.wait): CUDA graphs of kChain (norm -> one-token GEMV) pairs against kChain norms
// alone plus kChain GEMVs alone, as the profile's rows time each kernel (a chain of itself), per pair. What the
// simulator's kGemvPrefetchHideS stands for (planner/cost/gemv_prefetch.hpp). 32 MiB matrices over 8 copies (256 MiB:
// every call streams from HBM, as a layer's weights do). 0 where the GPU lacks the memory.
double gemv_prefetch_hide_seconds(gpu::BlockingGate& gate, const gpu::Stream& s, int g, int samples) {
  constexpr int64_t kN = 4096, kK = 4096, kCopies = 8;
  constexpr int kChain = 32;
  const std::vector<gpu::DeviceBuffer> w = rotating_weights(g, s, size_t(kN * kK) * 2, kCopies);
  if (w.empty()) return 0;
  gpu::DeviceBuffer x(g, size_t(kK) * 2), nw(g, size_t(kK) * 2), xn(g, size_t(kK) * 2), y(g, size_t(kN) * 2);
  kernels::fill_value(x.as<__nv_bfloat16>(), kK, 1.0f, s);
  kernels::fill_value(nw.as<__nv_bfloat16>(), kK, 1.0f, s);
  auto norm = [&] { kernels::rmsnorm(x.as<__nv_bfloat16>(), nw.as<__nv_bfloat16>(), xn.as<__nv_bfloat16>(), 1, kK, 1e-6f, s); };
  auto gemv = [&](int i) {
    kernels::dense_gemv(xn.as<__nv_bfloat16>(), w[size_t(i % kCopies)].as<__nv_bfloat16>(), y.as<__nv_bfloat16>(), 1, kN,
                        kK, s);
  };
  gpu::CapturedGraph pairs, norms, gemvs;
  pairs.capture(s, [&] {
    for (int i = 0; i < kChain; ++i) norm(), gemv(i);
  });
  norms.capture(s, [&] {
    for (int i = 0; i < kChain; ++i) norm();
  });
  gemvs.capture(s, [&] {
    for (int i = 0; i < kChain; ++i) gemv(i);
  });
  pairs.launch(s), norms.launch(s), gemvs.launch(s);
  s.synchronize();
  std::vector<double> d;
  for (int rep = 0; rep < samples; ++rep) {
    const double a = gpu::time_region(&gate, s, {}, [&] { norms.launch(s); });
    const double b = gpu::time_region(&gate, s, {}, [&] { gemvs.launch(s); });
    const double both = gpu::time_region(&gate, s, {}, [&] { pairs.launch(s); });
    d.push_back((a + b - both) / kChain);
  }
  return compute_stats(d).median;
}

}  // namespace

void measure_launch_overhead(Context& ctx) {
  using clk = std::chrono::steady_clock;
  gpu::BlockingGate gate;
  const int n = ctx.plan.quick ? 200 : 2000;
  auto gpus = ctx.measured_gpus();
  for (size_t gi = 0; gi < gpus.size(); ++gi) {
    const int g = gpus[gi];
    ctx.progress.update(double(gi) / double(gpus.size()), "gpu" + std::to_string(g));
    gpu::ScopedDevice d(g);
    gpu::Stream s(g);
    for (int i = 0; i < 100; ++i) gpu::launch_empty(s);
    s.synchronize();
    const bool pdl = gpu::launches_with_pdl();
    if (pdl) {
      for (int i = 0; i < 100; ++i) gpu::launch_empty_pdl(s);
      s.synchronize();
    }
    std::vector<double> b2b, gap, gap_pdl, rt;
    for (int rep = 0; rep < ctx.plan.samples; ++rep) {
      auto t0 = clk::now();
      for (int i = 0; i < n; ++i) gpu::launch_empty(s);
      s.synchronize();
      b2b.push_back(std::chrono::duration<double>(clk::now() - t0).count() / n);
      // At most 256 launches behind the gate: a stream's launch queue holds ~1000 entries, and a
      // host blocked on a full queue would never release the gate.
      const int gated = std::min(n, 256);
      gap.push_back(gpu::time_region(&gate, s, {}, [&] { for (int i = 0; i < gated; ++i) gpu::launch_empty(s); }) / gated);
      if (pdl)
        gap_pdl.push_back(
            gpu::time_region(&gate, s, {}, [&] { for (int i = 0; i < gated; ++i) gpu::launch_empty_pdl(s); }) / gated);
      auto t1 = clk::now();
      gpu::launch_empty(s);
      s.synchronize();
      rt.push_back(std::chrono::duration<double>(clk::now() - t1).count());
    }
    auto sb = compute_stats(b2b), sg = compute_stats(gap), sr = compute_stats(rt);
    nlohmann::json& l = ctx.ms.extra["launch"]["gpu" + std::to_string(g)];
    l = {{"back_to_back_us", sb.median * 1e6}, {"gpu_gap_us", sg.median * 1e6}, {"gpu_gap_serial_us", sg.median * 1e6},
         {"launch_sync_us", sr.median * 1e6}};
    if (pdl) {
      const double us = compute_stats(gap_pdl).median * 1e6;
      l["gpu_gap_pdl_us"] = us;
      l["gpu_gap_us"] = us;  // the floor the executor's kernels meet
      l["fork_join_us"] = fork_join_seconds(gate, s, g, ctx.plan.samples) * 1e6;
      if (const auto [p, gbps] = gemv_pair_progress(gate, s, g, ctx.plan.samples); p > 0) {
        l["gemv_pair_progress"] = p;
        l["gemv_alone_GBps"] = gbps;
      }
      l["gemv_prefetch_hide_us"] = gemv_prefetch_hide_seconds(gate, s, g, ctx.plan.samples) * 1e6;
    }
    if (gi == 0) ctx.ms.launch_overhead_s = sb.median;  // GPU 0 (or an MPI rank's own GPU)
  }
}

}  // namespace peerplan::profiler
