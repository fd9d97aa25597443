// One-shot and two-shot bf16 all-reduce over peer memory (issue 17), in one process: every rank's
// GPU of a group with peer access between all of them, buffers registered once, one kernel per
// rank per call, timed like the NCCL curves (spin gate, events on the first rank's stream with the
// others joined, reps per region), the sum checked after every size. The curves go to
// "peer_allreduce" (planner/cost/peer_allreduce_cost.* prices from them).
#include <fmt/format.h>

#include "profiler/common/peer_allreduce_plan.hpp"
#include "profiler/gpu/peer_group.hpp"
#include "profiler/gpu/timing.hpp"
#include "profiler/measure/curve.hpp"
#include "profiler/measure/nccl_sweep.hpp"

namespace peerplan::profiler {

namespace {

void sweep_group(Context& ctx, gpu::BlockingGate& gate, const std::vector<int>& gpus, size_t index, size_t count) {
  if (ctx.plan.collective_sizes.empty()) return;
  const auto sizes = peer_allreduce_sizes(ctx.plan.collective_sizes.front(), ctx.plan.collective_sizes.back(),
                                          int(gpus.size()));
  if (sizes.empty()) return;
  gpu::PeerArGroup g(gpus, sizes.back());
  g.fill_inputs(sizes.back());
  std::vector<gpu::Stream> streams;
  for (int d : gpus) streams.emplace_back(d);
  std::vector<const gpu::Stream*> others;
  for (size_t r = 1; r < streams.size(); ++r) others.push_back(&streams[r]);
  const std::string label = fmt::format("{}", fmt::join(gpus, ","));
  for (ArImpl impl : {ArImpl::OneShot, ArImpl::TwoShot}) {
    // One all-reduce of b bytes: every rank's kernel on its own stream.
    auto call_of = [&](int64_t b) {
      for (int r = 0; r < g.size(); ++r) {
        gpu::ScopedDevice d(g.device(r));
        kernels::peer_allreduce(impl, g.ranks(), r, g.local(r).out.as<__nv_bfloat16>(), b, streams[size_t(r)]);
      }
    };
    std::vector<CurvePoint> pts;
    for (size_t i = 0; i < sizes.size(); ++i) {
      const int64_t b = sizes[i];
      ctx.progress.update(peer_allreduce_progress(index, count, impl, i, sizes.size()),
                          fmt::format("{} [{}] {}", to_string(impl), label, format_size(b)));
      auto call = [&] { call_of(b); };
      // As the NCCL sweep: ~0.5 ms regions at an expected ~300 GB/s, at most 20 calls.
      const int reps = reps_for(b, 300, 500e-6, 20);
      auto region = [&](bool gated) {
        return gpu::time_region(gated ? &gate : nullptr, streams[0], others, [&] {
          for (int k = 0; k < reps; ++k) call();
        });
      };
      for (int w = 0; w < std::max(1, ctx.plan.warmup); ++w) region(w > 0);
      std::vector<double> t;
      for (int s = 0; s < ctx.plan.samples; ++s) t.push_back(region(true) / reps);
      pts.push_back({b, compute_stats(std::move(t))});
      for (int r = 0; r < g.size(); ++r)
        if (int64_t bad = g.mismatches(r, b))
          throw RuntimeError(fmt::format("peer all-reduce {} on [{}] at {}: {} wrong sums on rank {} (gpu{})",
                                         to_string(impl), label, format_size(b), bad, r, gpus[size_t(r)]));
    }
    ctx.ms.peer_allreduce.push_back(peer_allreduce_curve(impl, gpus, std::move(pts)));
    // Again inside one CUDA graph over the group, at decode sizes: what the executor's decode graphs
    // run (the stream curve above prices eager iterations).
    std::vector<CurvePoint> gpts;
    try {
      for (size_t i = 0; i < sizes.size() && sizes[i] <= kGraphTimedCollectiveMaxBytes; ++i) {
        const int64_t b = sizes[i];
        ctx.progress.update(peer_allreduce_progress(index, count, impl, sizes.size() - 1, sizes.size()),
                            fmt::format("{} in a graph [{}] {}", to_string(impl), label, format_size(b)));
        const int reps = reps_for(b, 300, 500e-6, 20);
        gpu::CapturedGraph graph;
        graph.capture_group(streams[0], others, [&] {
          for (int k = 0; k < reps; ++k) call_of(b);
        });
        auto region = [&] {
          return gpu::time_region(&gate, streams[0], {}, [&] {
            gpu::ScopedDevice d(g.device(0));
            graph.launch(streams[0]);
          });
        };
        for (int w = 0; w < std::max(1, ctx.plan.warmup); ++w) region();
        std::vector<double> t;
        for (int s = 0; s < ctx.plan.samples; ++s) t.push_back(region() / reps);
        gpts.push_back({b, compute_stats(std::move(t))});
        for (int r = 0; r < g.size(); ++r)
          if (int64_t bad = g.mismatches(r, b))
            throw RuntimeError(fmt::format("peer all-reduce {} in a graph on [{}] at {}: {} wrong sums on rank {}",
                                           to_string(impl), label, format_size(b), bad, r));
      }
    } catch (const gpu::CudaError& e) {  // not capturable here: decode is priced from the stream curve
      ctx.not_applicable(fmt::format("peer_allreduce {} in a CUDA graph", to_string(impl)), e.what());
      gpts.clear();
    }
    if (!gpts.empty()) {
      PeerAllReduceCurve gc = peer_allreduce_curve(impl, gpus, std::move(gpts));
      gc.graph = true;
      ctx.ms.peer_allreduce.push_back(std::move(gc));
    }
  }
}

}  // namespace

void measure_peer_allreduce(Context& ctx) {
  if (ctx.gpus() < 2) {
    ctx.not_applicable("peer_allreduce", "one GPU: an all-reduce needs at least two (validate --self-test runs the "
                                         "kernels on one GPU)");
    return;
  }
  const auto groups = peer_allreduce_groups(nccl_groups(ctx.gpus(), ctx.opts.all_groups), [&](int a, int b) {
    return ctx.machine.p2p[size_t(a)][size_t(b)].usable();
  });
  if (groups.empty()) {
    ctx.not_applicable("peer_allreduce", "no group of 2 to 8 GPUs with usable peer access between every pair");
    return;
  }
  gpu::BlockingGate gate;
  for (size_t gi = 0; gi < groups.size(); ++gi) sweep_group(ctx, gate, groups[gi], gi, groups.size());
}

}  // namespace peerplan::profiler
