// The peer-memory all-reduce (issue 17) with one process per GPU, as vLLM, SGLang and
// TensorRT-LLM run it: each rank allocates its input, scratch and signal block once, exports them
// with cudaIpcGetMemHandle, and maps every peer's (cudaIpcOpenMemHandle, peer access enabled
// lazily). Each member times its own stream behind its spin gate; members meet at an MPI barrier
// before opening their gates; a sample is the slowest member's time (the call is done when every
// rank has its sum). Same sizes, kernels and check as profiler/measure/peer_allreduce.cpp.
#include <cuda_runtime.h>

#include <memory>

#include <fmt/format.h>

#include "profiler/common/peer_allreduce_plan.hpp"
#include "profiler/common/sweep.hpp"
#include "profiler/gpu/peer_group.hpp"
#include "profiler/gpu/timing.hpp"
#include "profiler/measure/nccl_sweep.hpp"
#include "profiler/mpi/comm.hpp"
#include "profiler/mpi/mpi_context.hpp"

namespace peerplan::profiler {

namespace {

// A peer's allocation mapped into this process; unmapped on scope exit.
class Mapped {
 public:
  Mapped(const cudaIpcMemHandle_t& h, int device) : device_(device) {
    gpu::ScopedDevice d(device);
    CUDA_CHECK(cudaIpcOpenMemHandle(&ptr_, h, cudaIpcMemLazyEnablePeerAccess));
  }
  ~Mapped() {
    gpu::ScopedDevice d(device_);
    cudaIpcCloseMemHandle(ptr_);
  }
  Mapped(const Mapped&) = delete;
  Mapped& operator=(const Mapped&) = delete;
  void* get() const { return ptr_; }

 private:
  void* ptr_ = nullptr;
  int device_ = 0;
};

struct Handles {
  cudaIpcMemHandle_t data, scratch, signal;
};

void sweep_group_mpi(MpiContext& m, mpi::SubComm& sc, gpu::BlockingGate& gate, const std::vector<int>& gpus,
                     size_t index, size_t count) {
  Context& ctx = m.ctx;
  const int n = sc.size(), me = sc.rank();
  if (ctx.plan.collective_sizes.empty()) return;  // every member sees the same plan: none waits
  const auto sizes = peer_allreduce_sizes(ctx.plan.collective_sizes.front(), ctx.plan.collective_sizes.back(), n);
  if (sizes.empty()) return;
  gpu::ScopedDevice dev(m.device);
  gpu::PeerArLocal local(m.device, sizes.back());
  {
    std::vector<uint16_t> h(size_t(sizes.back() / 2));
    for (size_t i = 0; i < h.size(); ++i) h[i] = float_to_bf16(peer_allreduce_input(me, int64_t(i)));
    CUDA_CHECK(cudaMemcpy(local.data.get(), h.data(), size_t(sizes.back()), cudaMemcpyHostToDevice));
  }
  Handles mine{};
  CUDA_CHECK(cudaIpcGetMemHandle(&mine.data, local.data.get()));
  CUDA_CHECK(cudaIpcGetMemHandle(&mine.scratch, local.scratch.get()));
  CUDA_CHECK(cudaIpcGetMemHandle(&mine.signal, local.signal.get()));
  std::vector<std::unique_ptr<Mapped>> maps;
  kernels::PeerArRanks R;
  R.n = n;
  for (int r = 0; r < n; ++r) {
    Handles h = mine;
    sc.bcast_bytes(&h, sizeof h, r);  // every member's handles, in member order
    if (r == me) {
      R.data[r] = local.data.as<__nv_bfloat16>();
      R.scratch[r] = local.scratch.as<__nv_bfloat16>();
      R.signal[r] = local.signal.as<kernels::PeerArSignal>();
      continue;
    }
    for (const cudaIpcMemHandle_t* x : {&h.data, &h.scratch, &h.signal}) maps.push_back(std::make_unique<Mapped>(*x, m.device));
    R.data[r] = static_cast<const __nv_bfloat16*>(maps[maps.size() - 3]->get());
    R.scratch[r] = static_cast<__nv_bfloat16*>(maps[maps.size() - 2]->get());
    R.signal[r] = static_cast<kernels::PeerArSignal*>(maps[maps.size() - 1]->get());
  }
  gpu::Stream stream(m.device);
  const std::string label = fmt::format("{}", fmt::join(gpus, ","));
  for (ArImpl impl : {ArImpl::OneShot, ArImpl::TwoShot}) {
    std::vector<CurvePoint> pts;
    for (size_t i = 0; i < sizes.size(); ++i) {
      const int64_t b = sizes[i];
      ctx.progress.update(peer_allreduce_progress(index, count, impl, i, sizes.size()),
                          fmt::format("{} [{}] {} (MPI)", to_string(impl), label, format_size(b)));
      const int reps = reps_for(b, 300, 500e-6, 20);
      auto region = [&](bool gated) {
        double t = gpu::time_region(gated ? &gate : nullptr, stream, {}, [&] {
          for (int k = 0; k < reps; ++k) kernels::peer_allreduce(impl, R, me, local.out.as<__nv_bfloat16>(), b, stream);
        }, [&] { sc.barrier(); });
        return sc.allreduce_max(t);
      };
      for (int w = 0; w < std::max(1, ctx.plan.warmup); ++w) region(w > 0);
      std::vector<double> t;
      for (int s = 0; s < ctx.plan.samples; ++s) t.push_back(region(true) / reps);
      pts.push_back({b, compute_stats(std::move(t))});
      std::vector<uint16_t> h(size_t(b / 2));
      CUDA_CHECK(cudaStreamSynchronize(stream));
      CUDA_CHECK(cudaMemcpy(h.data(), local.out.get(), size_t(b), cudaMemcpyDeviceToHost));
      const double bad = sc.allreduce_sum(double(peer_allreduce_mismatches(h, n)));
      if (bad > 0)
        throw RuntimeError(fmt::format("peer all-reduce {} over MPI on [{}] at {}: {} wrong sums", to_string(impl), label,
                                       format_size(b), bad));
    }
    if (me == 0) ctx.ms.peer_allreduce.push_back(peer_allreduce_curve(impl, gpus, std::move(pts)));
  }
  sc.barrier();  // no member unmaps a peer's buffers while another still runs on them
}

}  // namespace

void mpi_measure_peer_allreduce(MpiContext& m) {
  Context& ctx = m.ctx;
  if (m.shared_gpus) {
    if (m.me == 0) ctx.not_applicable("peer_allreduce", "PEERPLAN_MPI_SHARE_GPU: ranks on one GPU have no peers");
    return;
  }
  const auto groups = peer_allreduce_groups(nccl_groups(m.layout.size(), ctx.opts.all_groups), [&](int a, int b) {
    return m.global.p2p[size_t(a)][size_t(b)].usable();
  });
  if (groups.empty()) {
    if (m.me == 0) ctx.not_applicable("peer_allreduce", "no group of 2 to 8 ranks with usable peer access between every pair");
    return;
  }
  gpu::BlockingGate gate;
  for (size_t gi = 0; gi < groups.size(); ++gi) {
    const bool member = std::find(groups[gi].begin(), groups[gi].end(), m.me) != groups[gi].end();
    mpi::SubComm sc(member);  // every rank takes part in the split
    if (member) sweep_group_mpi(m, sc, gate, groups[gi], gi, groups.size());
  }
}

}  // namespace peerplan::profiler
