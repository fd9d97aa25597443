// Kernel-launch overhead of each GPU, three figures:
//  back_to_back: wall time per launch of 2000 empty kernels launched back to back then synced
//    (the rate one CPU thread can drive a GPU at: what a decode step of many small kernels pays);
//    stored as launch_overhead_us (GPU 0's; per-GPU figures in extra.launch).
//  gpu_gap: GPU time per empty kernel when all are queued behind the gate (no CPU in the way).
//  launch_sync: one launch + cudaStreamSynchronize (round trip), median.
#include <algorithm>
#include <chrono>

#include "profiler/measure/curve.hpp"

namespace peerplan::profiler {

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
    std::vector<double> b2b, gap, rt;
    for (int rep = 0; rep < ctx.plan.samples; ++rep) {
      auto t0 = clk::now();
      for (int i = 0; i < n; ++i) gpu::launch_empty(s);
      s.synchronize();
      b2b.push_back(std::chrono::duration<double>(clk::now() - t0).count() / n);
      // At most 256 launches behind the gate: a stream's launch queue holds ~1000 entries, and a
      // host blocked on a full queue would never release the gate.
      const int gated = std::min(n, 256);
      gap.push_back(gpu::time_region(&gate, s, {}, [&] { for (int i = 0; i < gated; ++i) gpu::launch_empty(s); }) / gated);
      auto t1 = clk::now();
      gpu::launch_empty(s);
      s.synchronize();
      rt.push_back(std::chrono::duration<double>(clk::now() - t1).count());
    }
    auto sb = compute_stats(b2b), sg = compute_stats(gap), sr = compute_stats(rt);
    ctx.ms.extra["launch"]["gpu" + std::to_string(g)] = {
        {"back_to_back_us", sb.median * 1e6}, {"gpu_gap_us", sg.median * 1e6}, {"launch_sync_us", sr.median * 1e6}};
    if (gi == 0) ctx.ms.launch_overhead_s = sb.median;  // GPU 0 (or an MPI rank's own GPU)
  }
}

}  // namespace peerplan::profiler
