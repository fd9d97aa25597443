// NCCL with one rank per GPU, as serving engines and nccl-tests under mpirun run it: the group's
// first rank creates the unique id, MPI broadcasts it, every member calls ncclCommInitRank. Each
// member times its own stream behind its spin gate; the members meet at an MPI barrier before
// opening their gates, and the sample is the members' mean time (nccl-tests' MPI convention).
// Cross-host pairs are measured the same way with send/recv on a two-rank communicator.
#include <nccl.h>

#include <fmt/format.h>

#include "profiler/common/bus_bw.hpp"
#include "profiler/common/sweep.hpp"
#include "profiler/measure/curve.hpp"
#include "profiler/measure/nccl_sweep.hpp"
#include "profiler/mpi/comm.hpp"
#include "profiler/mpi/mpi_context.hpp"

namespace peerplan::profiler {

namespace {

class RankComm {
 public:
  RankComm(mpi::SubComm& sc) {
    ncclUniqueId id;
    if (sc.rank() == 0) NCCL_CHECK(ncclGetUniqueId(&id));
    sc.bcast_bytes(&id, sizeof id, 0);
    NCCL_CHECK(ncclCommInitRank(&comm_, sc.size(), id, sc.rank()));
  }
  ~RankComm() { if (comm_) ncclCommDestroy(comm_); }
  RankComm(const RankComm&) = delete;
  RankComm& operator=(const RankComm&) = delete;
  ncclComm_t get() const { return comm_; }

 private:
  ncclComm_t comm_ = nullptr;
};

std::string group_label(const std::vector<int>& g) { return fmt::format("{}", fmt::join(g, ",")); }

}  // namespace

void mpi_measure_nccl(MpiContext& m) {
  Context& ctx = m.ctx;
  if (m.shared_gpus) {
    if (m.me == 0) ctx.not_applicable("nccl", "PEERPLAN_MPI_SHARE_GPU: NCCL refuses two ranks on one GPU");
    return;
  }
  const auto& sizes = ctx.plan.collective_sizes;
  auto groups = nccl_groups(m.layout.size(), ctx.opts.all_groups);
  if (groups.empty()) {
    if (m.me == 0) ctx.not_applicable("nccl", "one rank: collectives need at least two");
    return;
  }
  const int64_t maxb = sizes.back();
  gpu::BlockingGate gate;
  for (size_t gi = 0; gi < groups.size(); ++gi) {
    const auto& devs = groups[gi];
    bool member = std::find(devs.begin(), devs.end(), m.me) != devs.end();
    mpi::SubComm sc(member);  // every rank takes part in the split
    if (!member) continue;
    const int n = sc.size(), r = sc.rank();
    gpu::ScopedDevice dev(m.device);
    RankComm comm(sc);
    gpu::Stream stream(m.device);
    gpu::DeviceBuffer send(m.device, size_t(maxb)), recv(m.device, size_t(maxb));
    gpu::launch_fill_float(send.as<float>(), size_t(maxb) / 4, float(r + 1), stream);
    stream.synchronize();
    CollectiveGroup group;
    group.gpus = devs;
    group.ranks = n;
    group.records = r == 0;  // the group's first rank records it
    group.progress_suffix = " (MPI)";
    group.where = " over MPI on [" + group_label(devs) + "]";
    // Each member times its own stream; members meet at a barrier before opening their gates.
    group.time_region = [&](CollOp op, const CollCounts& c, int reps, bool gated) {
      double t = gpu::time_region(gated ? &gate : nullptr, stream, {}, [&] {
        for (int k = 0; k < reps; ++k) enqueue_collective_rank(op, comm.get(), r, n, send.as<float>(), recv.as<float>(), c, stream);
      }, [&] { sc.barrier(); });
      return sc.allreduce_sum(t) / n;
    };
    group.wrong_values = [&](CollOp op, const CollCounts& c) {
      return size_t(sc.allreduce_sum(double(verify_collective_rank(op, r, n, m.device, recv.as<float>(), c, stream))));
    };
    sweep_collectives(ctx, group, sizes, gi, groups.size());
  }
}

void mpi_measure_network(MpiContext& m) {
  Context& ctx = m.ctx;
  PairPlan plan = plan_pairs(m.layout, ctx.opts.mpi_all_pairs);
  if (plan.inter.empty()) return;  // one host: nothing crosses the network
  const auto& sizes = ctx.plan.transfer_sizes;
  const int64_t maxb = sizes.back();
  gpu::BlockingGate gate;
  for (size_t k = 0; k < plan.inter.size(); ++k) {
    auto [src, dst] = plan.inter[k];
    bool member = m.me == src || m.me == dst;
    mpi::SubComm sc(member);
    if (!member) continue;
    const bool is_src = m.me == src;
    gpu::ScopedDevice dev(m.device);
    RankComm comm(sc);
    gpu::Stream stream(m.device);
    gpu::DeviceBuffer buf(m.device, size_t(maxb));
    const float fill = float(src + 1);
    if (is_src) gpu::launch_fill_float(buf.as<float>(), size_t(maxb) / 4, fill, stream);
    stream.synchronize();
    const int peer = sc.rank() == 0 ? 1 : 0;
    TransferCurve curve{src, dst, "net_nccl", "", {}};
    for (size_t si = 0; si < sizes.size(); ++si) {
      const int64_t bytes = sizes[si];
      ctx.progress.update((double(k) + double(si) / double(sizes.size())) / double(plan.inter.size()),
                          "net gpu" + std::to_string(src) + "->gpu" + std::to_string(dst) + " " + format_size(bytes));
      size_t count = size_t(bytes / 4);
      int reps = reps_for(bytes, 25, 500e-6, 20);
      bool gated = false;
      auto region = [&] {
        double t = gpu::time_region(gated ? &gate : nullptr, stream, {}, [&] {
          for (int i = 0; i < reps; ++i) {
            if (is_src) NCCL_CHECK(ncclSend(buf.get(), count, ncclFloat, peer, comm.get(), stream));
            else NCCL_CHECK(ncclRecv(buf.get(), count, ncclFloat, peer, comm.get(), stream));
          }
        }, [&] { sc.barrier(); });
        return sc.allreduce_max(t);  // the transfer is done when the receiver has it
      };
      for (int w = 0; w < std::max(1, ctx.plan.warmup); ++w) { region(); gated = true; }
      std::vector<double> t;
      for (int s = 0; s < ctx.plan.samples; ++s) t.push_back(region() / reps);
      curve.points.push_back({bytes, compute_stats(std::move(t))});
    }
    size_t bad = 0;
    if (!is_src) {
      gpu::DeviceBuffer err(m.device, sizeof(unsigned long long));
      CUDA_CHECK(cudaMemset(err.get(), 0, sizeof(unsigned long long)));
      gpu::launch_count_ne_float(buf.as<float>(), size_t(maxb) / 4, fill, err.as<unsigned long long>(), stream);
      unsigned long long h = 0;
      CUDA_CHECK(cudaMemcpy(&h, err.get(), sizeof h, cudaMemcpyDeviceToHost));
      bad = size_t(h);
    }
    if (sc.allreduce_max(double(bad)) > 0)
      throw RuntimeError("network send/recv gpu" + std::to_string(src) + "->gpu" + std::to_string(dst) + ": " +
                         "data check failed after the timed loop");
    if (is_src) ctx.ms.transfers.push_back(std::move(curve));
  }
}

}  // namespace peerplan::profiler
