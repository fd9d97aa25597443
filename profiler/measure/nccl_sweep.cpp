// NCCL collectives measured as nccl-tests does: warm-up, then timed regions of several
// back-to-back iterations; algBw/busBw by nccl-tests' formulas (common/bus_bw.hpp). Data: float
// sums (nccl-tests' default -d float -o sum); results verified after each op's sweep. The loop is
// the same whether one process drives every GPU of the group or each rank drives its own.
#include <algorithm>

#include <fmt/format.h>

#include "profiler/common/bus_bw.hpp"
#include "profiler/measure/curve.hpp"
#include "profiler/measure/nccl_sweep.hpp"

namespace peerplan::profiler {

std::vector<std::vector<int>> nccl_groups(int n, bool all_groups) {
  std::vector<std::vector<int>> g;
  if (n < 2) return g;
  std::vector<int> full;
  for (int i = 0; i < n; ++i) full.push_back(i);
  g.push_back(full);
  if (all_groups) {
    for (unsigned mask = 1; mask < (1u << n); ++mask) {
      std::vector<int> s;
      for (int i = 0; i < n; ++i) if (mask & (1u << i)) s.push_back(i);
      if (s.size() >= 2 && s.size() < size_t(n)) g.push_back(s);
    }
  } else if (n > 2) {
    for (int i = 0; i < n; ++i)
      for (int j = i + 1; j < n; ++j) g.push_back({i, j});
  }
  return g;
}

void enqueue_collective_rank(CollOp op, ncclComm_t comm, int r, int n, const float* s, float* d, const CollCounts& c,
                             cudaStream_t st) {
  switch (op) {
    case CollOp::AllReduce: NCCL_CHECK(ncclAllReduce(s, d, size_t(c.send_count), ncclFloat, ncclSum, comm, st)); break;
    case CollOp::AllGather: NCCL_CHECK(ncclAllGather(s, d, size_t(c.send_count), ncclFloat, comm, st)); break;
    case CollOp::ReduceScatter: NCCL_CHECK(ncclReduceScatter(s, d, size_t(c.recv_count), ncclFloat, ncclSum, comm, st)); break;
    case CollOp::AllToAll: {
      size_t chunk = size_t(c.send_count / n);
      NCCL_CHECK(ncclGroupStart());
      for (int p = 0; p < n; ++p) {
        NCCL_CHECK(ncclSend(s + size_t(p) * chunk, chunk, ncclFloat, p, comm, st));
        NCCL_CHECK(ncclRecv(d + size_t(p) * chunk, chunk, ncclFloat, p, comm, st));
      }
      NCCL_CHECK(ncclGroupEnd());
      break;
    }
    case CollOp::SendRecv:  // ring shift, as nccl-tests' sendrecv_perf
      NCCL_CHECK(ncclGroupStart());
      NCCL_CHECK(ncclSend(s, size_t(c.send_count), ncclFloat, (r + 1) % n, comm, st));
      NCCL_CHECK(ncclRecv(d, size_t(c.recv_count), ncclFloat, (r - 1 + n) % n, comm, st));
      NCCL_CHECK(ncclGroupEnd());
      break;
    case CollOp::Broadcast: NCCL_CHECK(ncclBroadcast(s, d, size_t(c.send_count), ncclFloat, 0, comm, st)); break;
  }
}

size_t verify_collective_rank(CollOp op, int r, int n, int device, const float* out, const CollCounts& c,
                              cudaStream_t stream) {
  float sum = float(n * (n + 1) / 2);
  gpu::ScopedDevice d(device);
  CUDA_CHECK(cudaStreamSynchronize(stream));
  gpu::DeviceBuffer err(device, sizeof(unsigned long long));
  CUDA_CHECK(cudaMemset(err.get(), 0, sizeof(unsigned long long)));
  auto check = [&](size_t off, size_t count, float v) { gpu::launch_count_ne_float(out + off, count, v, err.as<unsigned long long>(), nullptr); };
  switch (op) {
    case CollOp::AllReduce: check(0, size_t(c.recv_count), sum); break;
    case CollOp::ReduceScatter: check(0, size_t(c.recv_count), sum); break;
    case CollOp::Broadcast: check(0, size_t(c.recv_count), 1.0f); break;
    case CollOp::SendRecv: check(0, size_t(c.recv_count), float((r - 1 + n) % n + 1)); break;
    case CollOp::AllGather:
    case CollOp::AllToAll: {
      size_t chunk = size_t(c.recv_count / n);
      for (int p = 0; p < n; ++p) check(size_t(p) * chunk, chunk, float(p + 1));
      break;
    }
  }
  unsigned long long h = 0;
  CUDA_CHECK(cudaMemcpy(&h, err.get(), sizeof h, cudaMemcpyDeviceToHost));
  return size_t(h);
}

void sweep_collectives(Context& ctx, const CollectiveGroup& group, const std::vector<int64_t>& sizes, size_t index,
                       size_t count) {
  const auto& ops = all_coll_ops();
  const std::string label = fmt::format("{}", fmt::join(group.gpus, ","));
  for (size_t oi = 0; oi < ops.size(); ++oi) {
    const CollOp op = ops[oi];
    CollectiveCurve curve;
    curve.op = coll_op_name(op);
    curve.gpus = group.gpus;
    curve.p2p = group.p2p;
    CollCounts last{};
    for (size_t i = 0; i < sizes.size(); ++i) {
      CollCounts c = coll_counts(op, group.ranks, sizes[i], 4);
      if (c.size_bytes <= 0 || c.send_count <= 0) continue;
      ctx.progress.update((double(index * ops.size() + oi) + double(i) / double(sizes.size())) / double(count * ops.size()),
                          group.progress_prefix + curve.op + " [" + label + "] " + format_size(c.size_bytes) +
                              group.progress_suffix);
      // Expected ~100 GB/s algBw (lower without P2P): iterations per region so small sizes are
      // timed over >= ~0.5 ms, like nccl-tests' 20 iterations; at most 20.
      const int reps = reps_for(c.size_bytes, group.p2p ? 300 : 20, 500e-6, 20);
      // The first warm-up is not gated: NCCL connects lazily inside the first calls and must not
      // wait on a stream that a spin kernel holds.
      bool gated = false;
      for (int w = 0; w < std::max(1, ctx.plan.warmup); ++w) {
        group.time_region(op, c, reps, gated);
        gated = true;
      }
      std::vector<double> t;
      for (int s = 0; s < ctx.plan.samples; ++s) t.push_back(group.time_region(op, c, reps, gated) / reps);
      curve.points.push_back({c.size_bytes, compute_stats(std::move(t))});
      last = c;
    }
    const size_t bad = group.wrong_values(op, last);
    if (bad)
      throw RuntimeError("NCCL " + curve.op + group.where + ": " + std::to_string(bad) + " wrong values after the timed loop");
    CollectiveCurve g{curve.op, curve.gpus, curve.p2p, {}, true};
    if (group.records) ctx.ms.collectives.push_back(std::move(curve));
    if (op == CollOp::AllReduce && group.graph_samples) {
      try {
        for (int64_t size : sizes) {
          CollCounts c = coll_counts(op, group.ranks, size, 4);
          if (c.size_bytes <= 0 || c.send_count <= 0 || c.size_bytes > kGraphTimedCollectiveMaxBytes) continue;
          ctx.progress.update(double(index * ops.size() + oi + 1) / double(count * ops.size()),
                              group.progress_prefix + g.op + " in a graph [" + label + "] " + format_size(c.size_bytes) +
                                  group.progress_suffix);
          const int reps = reps_for(c.size_bytes, group.p2p ? 300 : 20, 500e-6, 20);
          g.points.push_back({c.size_bytes, compute_stats(group.graph_samples(op, c, reps, std::max(1, ctx.plan.warmup),
                                                                              ctx.plan.samples))});
          last = c;
        }
      } catch (const std::exception& e) {  // not capturable here: decode is priced from the stream curve
        ctx.not_applicable("nccl all_reduce in a CUDA graph" + group.where, e.what());
        g.points.clear();
      }
      if (const size_t wrong = g.points.empty() ? 0 : group.wrong_values(op, last))
        throw RuntimeError("NCCL " + g.op + " in a graph" + group.where + ": " + std::to_string(wrong) +
                           " wrong values after the timed loop");
      if (group.records && !g.points.empty()) ctx.ms.collectives.push_back(std::move(g));
    }
  }
}

}  // namespace peerplan::profiler
