// NCCL collectives in one process, as nccl-tests runs them: all communicators of a group in this
// process (ncclCommInitAll), one group call per iteration over all ranks, timed on the first
// rank's stream with the others joined (common sweep loop: nccl_sweep.cpp).
#include <nccl.h>

#include "profiler/gpu/timing.hpp"
#include "profiler/measure/curve.hpp"
#include "profiler/measure/nccl_sweep.hpp"

namespace peerplan::profiler {

namespace {

struct Rank {
  gpu::Stream stream;
  gpu::DeviceBuffer send, recv;
};

// One group's communicators and buffers; send buffers hold rank + 1 (what the check expects).
struct InProcessGroup {
  std::vector<int> devs;
  gpu::NcclComms comms;
  std::vector<Rank> ranks;
  std::vector<const gpu::Stream*> others;  // every rank's stream but the first (the timing one)

  InProcessGroup(const std::vector<int>& d, int64_t maxb) : devs(d), comms(d) {
    for (int dev : devs) ranks.push_back({gpu::Stream(dev), gpu::DeviceBuffer(dev, size_t(maxb)), gpu::DeviceBuffer(dev, size_t(maxb))});
    for (size_t r = 0; r < ranks.size(); ++r) {
      gpu::ScopedDevice g(devs[r]);
      gpu::launch_fill_float(ranks[r].send.as<float>(), size_t(maxb) / 4, float(r + 1), ranks[r].stream);
      ranks[r].stream.synchronize();
    }
    for (size_t r = 1; r < ranks.size(); ++r) others.push_back(&ranks[r].stream);
  }

  void enqueue(CollOp op, const CollCounts& c) {
    const int n = comms.size();
    NCCL_CHECK(ncclGroupStart());
    for (int r = 0; r < n; ++r)
      enqueue_collective_rank(op, comms[r], r, n, ranks[size_t(r)].send.as<float>(), ranks[size_t(r)].recv.as<float>(),
                              c, ranks[size_t(r)].stream);
    NCCL_CHECK(ncclGroupEnd());
  }

  size_t wrong_values(CollOp op, const CollCounts& c) {
    const int n = comms.size();
    size_t bad = 0;
    for (int r = 0; r < n; ++r)
      bad += verify_collective_rank(op, r, n, devs[size_t(r)], ranks[size_t(r)].recv.as<float>(), c,
                                    ranks[size_t(r)].stream);
    return bad;
  }
};

}  // namespace

void run_nccl_sweep(Context& ctx, const std::vector<int64_t>& sizes, bool p2p) {
  const auto groups = nccl_groups(ctx.gpus(), ctx.opts.all_groups);
  const int64_t maxb = sizes.back();
  gpu::BlockingGate gate;
  for (size_t gi = 0; gi < groups.size(); ++gi) {
    InProcessGroup in(groups[gi], maxb);
    CollectiveGroup group;
    group.gpus = groups[gi];
    group.ranks = int(groups[gi].size());
    group.p2p = p2p;
    group.progress_prefix = p2p ? "" : "p2p-off ";
    group.where = p2p ? "" : " (P2P disabled)";
    group.time_region = [&](CollOp op, const CollCounts& c, int reps, bool gated) {
      return gpu::time_region(gated ? &gate : nullptr, in.ranks[0].stream, in.others, [&] {
        for (int k = 0; k < reps; ++k) in.enqueue(op, c);
      });
    };
    group.wrong_values = [&](CollOp op, const CollCounts& c) { return in.wrong_values(op, c); };
    group.graph_samples = [&](CollOp op, const CollCounts& c, int reps, int warmup, int samples) {
      gpu::CapturedGraph graph;  // the group's calls on every rank's stream, as a decode graph holds them
      graph.capture_group(in.ranks[0].stream, in.others, [&] {
        for (int k = 0; k < reps; ++k) in.enqueue(op, c);
      });
      auto region = [&] {
        return gpu::time_region(&gate, in.ranks[0].stream, {}, [&] {
          gpu::ScopedDevice d(in.devs[0]);
          graph.launch(in.ranks[0].stream);
        });
      };
      for (int w = 0; w < warmup; ++w) region();
      std::vector<double> t;
      for (int k = 0; k < samples; ++k) t.push_back(region() / reps);
      return t;
    };
    sweep_collectives(ctx, group, sizes, gi, groups.size());
  }
}

void measure_nccl(Context& ctx) {
  if (ctx.gpus() < 2) {
    ctx.not_applicable("nccl", "one GPU: collectives need at least two");
    return;
  }
  run_nccl_sweep(ctx, ctx.plan.collective_sizes, true);
}

}  // namespace peerplan::profiler
