// Same-host peer copies between processes, as serving engines with one process per GPU do them:
// the destination exports its buffer with cudaIpcGetMemHandle, the source maps it
// (cudaIpcOpenMemHandle, peer access enabled lazily) and copies into it by copy engine. Timed on
// the source exactly as the single-process p2p_ce (spin-kernel gate, events, reps per region).
#include <cuda_runtime.h>

#include "profiler/measure/curve.hpp"
#include "profiler/mpi/comm.hpp"
#include "profiler/mpi/mpi_context.hpp"

namespace peerplan::profiler {

namespace {

constexpr int kTagIpc = 101;

// A peer buffer mapped into this process; unmapped on scope exit.
class IpcMapping {
 public:
  IpcMapping(const cudaIpcMemHandle_t& h, int device) : device_(device) {
    gpu::ScopedDevice d(device);
    CUDA_CHECK(cudaIpcOpenMemHandle(&ptr_, h, cudaIpcMemLazyEnablePeerAccess));
  }
  ~IpcMapping() {
    gpu::ScopedDevice d(device_);
    cudaIpcCloseMemHandle(ptr_);
  }
  IpcMapping(const IpcMapping&) = delete;
  IpcMapping& operator=(const IpcMapping&) = delete;
  void* get() const { return ptr_; }

 private:
  void* ptr_ = nullptr;
  int device_ = 0;
};

// One direction of an IPC copy: this process's `src` into another process's buffer mapped at
// `dst`, by copy engine on `s`, timed as single-process p2p_ce; after each size the bytes are
// read back through the mapping (they must have arrived in the other process's buffer).
SweepSpec ipc_copy_spec(const Context& ctx, std::string label, void* dst, const void* src, int device, uint32_t seed,
                        const gpu::Stream& s) {
  SweepSpec spec;
  spec.label = std::move(label);
  spec.sizes = ctx.plan.transfer_sizes;
  spec.expected_gbps = 400;
  spec.timing = &s;
  spec.enqueue = [dst, src, &s](int64_t b) {
    CUDA_CHECK(cudaMemcpyAsync(dst, src, size_t(b), cudaMemcpyDeviceToDevice, s));
  };
  spec.verify = [dst, device, seed](int64_t b) { return gpu::count_pattern_errors(dst, device, size_t(b) / 4, seed); };
  return spec;
}

// Same-host ordered pairs through CUDA IPC.
void ipc_p2p_ce(MpiContext& m) {
  Context& ctx = m.ctx;
  PairPlan plan = plan_pairs(m.layout, false);
  std::vector<std::pair<int, int>> pairs;
  for (auto p : plan.intra)
    if (m.global.p2p[size_t(p.first)][size_t(p.second)].usable()) pairs.push_back(p);
  if (pairs.empty()) {
    if (m.me == 0) ctx.not_applicable("p2p_ce", "no same-host pair with usable peer access");
    return;
  }
  int64_t maxb = ctx.plan.transfer_sizes.back();
  gpu::BlockingGate gate;
  for (size_t k = 0; k < pairs.size(); ++k) {
    auto [src, dst] = pairs[k];
    const uint32_t seed = 0x11000000u + uint32_t(src * 16 + dst);  // as single-process p2p_ce
    if (m.me == dst) {
      gpu::DeviceBuffer buf(m.device, size_t(maxb));
      CUDA_CHECK(cudaMemset(buf.get(), 0, size_t(maxb)));
      CUDA_CHECK(cudaDeviceSynchronize());
      cudaIpcMemHandle_t h;
      CUDA_CHECK(cudaIpcGetMemHandle(&h, buf.get()));
      mpi::send_bytes(&h, sizeof h, src, kTagIpc);
      mpi::barrier();  // the source is done with the buffer
      continue;
    }
    if (m.me == src) {
      cudaIpcMemHandle_t h;
      mpi::recv_bytes(&h, sizeof h, dst, kTagIpc);
      {
        IpcMapping peer(h, m.device);
        gpu::DeviceBuffer sbuf(m.device, size_t(maxb));
        gpu::launch_fill_pattern(sbuf.as<uint32_t>(), size_t(maxb) / 4, seed, nullptr);
        CUDA_CHECK(cudaDeviceSynchronize());
        gpu::Stream s(m.device);
        SweepSpec spec = ipc_copy_spec(ctx, "gpu" + std::to_string(src) + "->gpu" + std::to_string(dst) + " (IPC)",
                                       peer.get(), sbuf.get(), m.device, seed, s);
        TransferCurve c{src, dst, "p2p_ce", "", {}};
        c.points = sweep_transfer(ctx, gate, spec, double(k) / double(pairs.size()), double(k + 1) / double(pairs.size()));
        ctx.ms.transfers.push_back(std::move(c));
        CUDA_CHECK(cudaDeviceSynchronize());
      }
      mpi::barrier();
      continue;
    }
    mpi::barrier();
  }
}

}  // namespace

void mpi_measure_p2p_ce(MpiContext& m) {
  ipc_p2p_ce(m);
  if (!m.shared_gpus) mpi_measure_network(m);  // cross-host pairs; NCCL refuses two ranks on one GPU
}

void mpi_measure_p2p_ce_bidir(MpiContext& m) {
  Context& ctx = m.ctx;
  if (m.shared_gpus) {
    if (m.me == 0) ctx.not_applicable("p2p_ce_bidir", "PEERPLAN_MPI_SHARE_GPU: both directions would share one GPU's copy engines");
    return;
  }
  PairPlan plan = plan_pairs(m.layout, false);
  std::vector<std::pair<int, int>> pairs;  // unordered, usable both ways
  for (auto [a, b] : plan.intra)
    if (a < b && m.global.p2p[size_t(a)][size_t(b)].usable() && m.global.p2p[size_t(b)][size_t(a)].usable())
      pairs.push_back({a, b});
  if (pairs.empty()) {
    if (m.me == 0) ctx.not_applicable("p2p_ce_bidir", "no same-host pair with usable peer access both ways");
    return;
  }
  const int64_t maxb = ctx.plan.transfer_sizes.back();
  gpu::BlockingGate gate;
  for (size_t k = 0; k < pairs.size(); ++k) {
    auto [a, b] = pairs[k];
    const bool member = m.me == a || m.me == b;
    mpi::SubComm sc(member);
    if (!member) continue;
    // Each rank copies its buffer into the other's, at the same time: both expose a destination
    // through IPC, both map the other's, both gate their stream, meet, and open their gates.
    const int peer = m.me == a ? b : a;
    const uint32_t seed = 0x22000000u + uint32_t(m.me * 16 + peer);  // as single-process p2p_ce_bidir
    gpu::ScopedDevice dev(m.device);
    gpu::DeviceBuffer mine_dst(m.device, size_t(maxb)), src(m.device, size_t(maxb));
    CUDA_CHECK(cudaMemset(mine_dst.get(), 0, size_t(maxb)));
    gpu::launch_fill_pattern(src.as<uint32_t>(), size_t(maxb) / 4, seed, nullptr);
    CUDA_CHECK(cudaDeviceSynchronize());
    cudaIpcMemHandle_t h, theirs;
    CUDA_CHECK(cudaIpcGetMemHandle(&h, mine_dst.get()));
    if (m.me == a) {
      mpi::send_bytes(&h, sizeof h, peer, kTagIpc + 1);
      mpi::recv_bytes(&theirs, sizeof theirs, peer, kTagIpc + 1);
    } else {
      mpi::recv_bytes(&theirs, sizeof theirs, peer, kTagIpc + 1);
      mpi::send_bytes(&h, sizeof h, peer, kTagIpc + 1);
    }
    {
      IpcMapping target(theirs, m.device);
      gpu::Stream s(m.device);
      SweepSpec spec = ipc_copy_spec(ctx, "gpu" + std::to_string(a) + "<->gpu" + std::to_string(b) + " (IPC)",
                                     target.get(), src.get(), m.device, seed, s);
      spec.before_release = [&] { sc.barrier(); };
      spec.combine = [&](double t) { return sc.allreduce_max(t); };  // both directions done
      TransferCurve c{m.me, peer, "p2p_ce_bidir", "", {}};
      c.points = sweep_transfer(ctx, gate, spec, double(k) / double(pairs.size()), double(k + 1) / double(pairs.size()));
      ctx.ms.transfers.push_back(std::move(c));
      CUDA_CHECK(cudaDeviceSynchronize());
      sc.barrier();  // the other rank has finished reading and writing through its mapping too
    }
  }
}

}  // namespace peerplan::profiler
