// Host-staged copies between processes, as an engine without peer access between its processes
// would do them: device -> shared pinned host memory (POSIX shm, registered with CUDA in both
// processes) -> device, in 4 MiB chunks over two slots. The hand-off is on the GPUs, not the
// hosts: the source's stream writes a sequence number into the slot's flag after its D2H
// (cuStreamWriteValue32), the destination's stream waits for it (cuStreamWaitValue32) before its
// H2D and writes the slot's "free" flag back. The source times the whole transfer with its spin
// gate and events, and its timing stream waits for the destination's last "free" flag, so the
// time runs from the first D2H to the last H2D as in the single-process measurement.
#include <cuda.h>
#include <cuda_runtime.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "profiler/common/sweep.hpp"
#include "profiler/measure/curve.hpp"
#include "profiler/mpi/comm.hpp"
#include "profiler/mpi/mpi_context.hpp"

namespace peerplan::profiler {

namespace {

constexpr int64_t kChunk = int64_t(4) << 20;  // as measure/host_staged.cpp
constexpr size_t kFlagBytes = 4096;           // full[2] at 0 and 64, free[2] at 128 and 192
constexpr int kTagShm = 201, kTagBad = 202;
constexpr double kExpectedGbps = 25;          // sweep parameters shared by both sides

// A POSIX shared-memory segment mapped and registered with CUDA (portable, device-mapped).
class SharedPinned {
 public:
  SharedPinned(const std::string& name, size_t bytes, bool create, int numa_node) : name_(name), bytes_(bytes) {
    int fd = shm_open(name.c_str(), create ? O_CREAT | O_EXCL | O_RDWR : O_RDWR, 0600);
    if (fd < 0) throw RuntimeError("shm_open(" + name + "): " + std::strerror(errno) + " (is /dev/shm mounted and large enough?)");
    if (create && ftruncate(fd, off_t(bytes)) != 0) {
      int e = errno;
      close(fd);
      shm_unlink(name.c_str());
      throw RuntimeError("ftruncate(" + name + ", " + std::to_string(bytes) + "): " + std::strerror(e));
    }
    ptr_ = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (ptr_ == MAP_FAILED) {
      ptr_ = nullptr;
      if (create) shm_unlink(name.c_str());
      throw RuntimeError("mmap(" + name + "): " + std::strerror(errno));
    }
    if (create) {
      if (numa_node >= 0) gpu::bind_host_memory(ptr_, bytes, numa_node);
      std::memset(ptr_, 0, bytes);  // first touch places the pages; flags start at 0
    }
    CUDA_CHECK(cudaHostRegister(ptr_, bytes, cudaHostRegisterPortable | cudaHostRegisterMapped));
    registered_ = true;
  }
  ~SharedPinned() {
    if (registered_) cudaHostUnregister(ptr_);
    if (ptr_) munmap(ptr_, bytes_);
  }
  SharedPinned(const SharedPinned&) = delete;
  SharedPinned& operator=(const SharedPinned&) = delete;
  char* data() const { return static_cast<char*>(ptr_) + kFlagBytes; }
  CUdeviceptr flag(size_t offset) const {
    void* d = nullptr;
    CUDA_CHECK(cudaHostGetDevicePointer(&d, static_cast<char*>(ptr_) + offset, 0));
    return CUdeviceptr(d);
  }
  const std::string& name() const { return name_; }

 private:
  std::string name_;
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
  bool registered_ = false;
};

// The driver's stream memory operations, looked up through the runtime: linking libcuda directly
// would make every peerplan binary need a GPU driver to start, even for planning on a laptop.
struct StreamMemOps {
  using WaitFn = CUresult (*)(CUstream, CUdeviceptr, cuuint32_t, unsigned int);
  using WriteFn = CUresult (*)(CUstream, CUdeviceptr, cuuint32_t, unsigned int);
  WaitFn wait = nullptr;
  WriteFn write = nullptr;
  StreamMemOps() {
    wait = reinterpret_cast<WaitFn>(lookup("cuStreamWaitValue32"));
    write = reinterpret_cast<WriteFn>(lookup("cuStreamWriteValue32"));
  }
  static void* lookup(const char* name) {
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult q{};
    CUDA_CHECK(cudaGetDriverEntryPointByVersion(name, &fn, 12000, cudaEnableDefault, &q));
    if (q != cudaDriverEntryPointSuccess || !fn)
      throw RuntimeError(std::string("the CUDA driver does not provide ") + name + " (needed for host-staged copies between processes)");
    return fn;
  }
};

// CU_CHECK would pull cuGetErrorName from libcuda; this names the call and the CUresult code.
void check_cu(CUresult r, const char* call) {
  if (r != CUDA_SUCCESS)
    throw RuntimeError(std::string("CUDA driver call failed: ") + call + ": CUresult " + std::to_string(int(r)) +
                       " (see cuda.h; e.g. 1 = invalid value, 801 = not supported)");
}
#define STREAM_OP_CHECK(call) check_cu((call), #call)

struct Flags {
  CUdeviceptr full[2], free[2];
};

// Both sides walk the same chunks in the same order, so both know each chunk's sequence number.
struct Sequencer {
  uint32_t seq = 0;
  uint32_t last[2] = {0, 0};  // last sequence number put in each slot
};

// One pair's staging on this rank (source or destination): the shared segment and its flags, this
// rank's buffer and two copy streams, and the chunk sequence both sides walk in the same order.
struct StagedPair {
  int src = 0, dst = 0, peer = 0;
  bool is_src = false;
  uint32_t seed = 0;
  std::unique_ptr<SharedPinned> shm;
  Flags f{};
  gpu::DeviceBuffer buf;
  gpu::Stream st[2];
  Sequencer sq;
  // Calls each(slot, offset, bytes) for the chunks of a transfer of `bytes`, alternating slots.
  template <class F>
  void chunks(int64_t bytes, F&& each) const {
    for (int64_t off = 0, i = 0; off < bytes; off += kChunk, ++i) each(int(i % 2), off, size_t(std::min(kChunk, bytes - off)));
  }
};

// The source creates the segment (on its GPU's NUMA node) and unlinks it once the destination has
// mapped it too: nothing is left in /dev/shm after a crash.
std::unique_ptr<SharedPinned> open_segment(const MpiContext& m, const StagedPair& p, size_t seg_bytes, int numa) {
  std::string name = "/peerplan-" + std::to_string(m.job) + "-" + std::to_string(p.src) + "-" + std::to_string(p.dst);
  std::unique_ptr<SharedPinned> shm;
  int token = 0;
  if (p.is_src) {
    shm = std::make_unique<SharedPinned>(name, seg_bytes, true, numa);
    mpi::send_bytes(&token, sizeof token, p.peer, kTagShm);   // created
    mpi::recv_bytes(&token, sizeof token, p.peer, kTagShm);   // mapped by the destination
    shm_unlink(name.c_str());
  } else {
    mpi::recv_bytes(&token, sizeof token, p.peer, kTagShm);
    shm = std::make_unique<SharedPinned>(name, seg_bytes, false, -1);
    mpi::send_bytes(&token, sizeof token, p.peer, kTagShm);
  }
  return shm;
}

// Source: D2H into the slots behind the destination's "free" flags, timed by sweep_transfer; the
// destination reports each size's wrong words.
void send_side(Context& ctx, gpu::BlockingGate& gate, StagedPair& p, const StreamMemOps& ops, int numa, double from,
               double to) {
  SweepSpec spec;
  spec.label = "gpu" + std::to_string(p.src) + "->shm->gpu" + std::to_string(p.dst);
  spec.sizes = ctx.plan.transfer_sizes;
  spec.expected_gbps = kExpectedGbps;
  spec.timing = &p.st[0];
  spec.others = {&p.st[1]};
  int64_t cur_bytes = -1;
  int calls = 0, reps = 0;
  spec.enqueue = [&](int64_t bytes) {
    if (bytes != cur_bytes) { cur_bytes = bytes; calls = 0; reps = reps_for(bytes, spec.expected_gbps, spec.region_target_s, spec.max_reps); }
    p.chunks(bytes, [&](int slot, int64_t off, size_t n) {
      uint32_t seq = ++p.sq.seq;
      if (p.sq.last[slot]) STREAM_OP_CHECK(ops.wait(p.st[slot], p.f.free[slot], p.sq.last[slot], CU_STREAM_WAIT_VALUE_GEQ));
      CUDA_CHECK(cudaMemcpyAsync(p.shm->data() + slot * kChunk, p.buf.as<char>() + off, n, cudaMemcpyDeviceToHost, p.st[slot]));
      STREAM_OP_CHECK(ops.write(p.st[slot], p.f.full[slot], seq, CU_STREAM_WRITE_VALUE_DEFAULT));
      p.sq.last[slot] = seq;
    });
    // Region end: the timing stream waits until the destination has drained both slots.
    if (++calls % reps == 0)
      for (int s = 0; s < 2; ++s)
        if (p.sq.last[s]) STREAM_OP_CHECK(ops.wait(p.st[0], p.f.free[s], p.sq.last[s], CU_STREAM_WAIT_VALUE_GEQ));
  };
  spec.verify = [&](int64_t) {
    unsigned long long bad = 0;
    mpi::recv_bytes(&bad, sizeof bad, p.peer, kTagBad);
    return size_t(bad);
  };
  TransferCurve c{p.src, p.dst, "host_staged", numa >= 0 ? "numa_local" : "", {}};
  c.points = sweep_transfer(ctx, gate, spec, from, to);
  ctx.ms.transfers.push_back(std::move(c));
}

// Destination: the mirror of sweep_transfer's loop (same sizes, regions and reps, no timing): H2D
// out of each slot once its "full" flag arrives, then "free" back; after each size the data check.
void receive_side(Context& ctx, int device, StagedPair& p, const StreamMemOps& ops) {
  for (int64_t bytes : ctx.plan.transfer_sizes) {
    int reps = reps_for(bytes, kExpectedGbps, SweepSpec{}.region_target_s, SweepSpec{}.max_reps);
    for (int region = 0; region < ctx.plan.warmup + ctx.plan.samples; ++region)
      for (int r = 0; r < reps; ++r)
        p.chunks(bytes, [&](int slot, int64_t off, size_t n) {
          uint32_t seq = ++p.sq.seq;
          STREAM_OP_CHECK(ops.wait(p.st[slot], p.f.full[slot], seq, CU_STREAM_WAIT_VALUE_GEQ));
          CUDA_CHECK(cudaMemcpyAsync(p.buf.as<char>() + off, p.shm->data() + slot * kChunk, n, cudaMemcpyHostToDevice, p.st[slot]));
          STREAM_OP_CHECK(ops.write(p.st[slot], p.f.free[slot], seq, CU_STREAM_WRITE_VALUE_DEFAULT));
          p.sq.last[slot] = seq;
        });
    p.st[0].synchronize();
    p.st[1].synchronize();
    unsigned long long bad = gpu::count_pattern_errors(p.buf.get(), device, size_t(bytes) / 4, p.seed);
    mpi::send_bytes(&bad, sizeof bad, p.peer, kTagBad);
  }
}

}  // namespace

void mpi_measure_host_staged(MpiContext& m) {
  Context& ctx = m.ctx;
  PairPlan plan = plan_pairs(m.layout, false);
  if (plan.intra.empty()) {
    if (m.me == 0) ctx.not_applicable("host_staged", "no two ranks on one host");
    return;
  }
  const int64_t maxb = ctx.plan.transfer_sizes.back();
  const size_t seg_bytes = kFlagBytes + size_t(2 * kChunk);
  gpu::BlockingGate gate;
  for (size_t k = 0; k < plan.intra.size(); ++k) {
    auto [src, dst] = plan.intra[k];
    if (m.me != src && m.me != dst) {
      mpi::barrier();
      continue;
    }
    gpu::ScopedDevice dev(m.device);  // before p: its buffers and streams are freed on this device
    StagedPair p;
    p.src = src, p.dst = dst, p.is_src = m.me == src, p.peer = p.is_src ? dst : src;
    p.seed = 0x88000000u + uint32_t(src * 16 + dst);
    // The source GPU's NUMA node on its host (the merged machine shifts NUMA indices per host).
    const int numa = m.ctx.machine.gpus[size_t(m.device)].numa;  // valid on the source rank, which places the memory
    p.shm = open_segment(m, p, seg_bytes, numa);
    p.f = Flags{{p.shm->flag(0), p.shm->flag(64)}, {p.shm->flag(128), p.shm->flag(192)}};
    p.buf = gpu::DeviceBuffer(m.device, size_t(maxb));
    if (p.is_src) gpu::launch_fill_pattern(p.buf.as<uint32_t>(), size_t(maxb) / 4, p.seed, nullptr);
    else CUDA_CHECK(cudaMemset(p.buf.get(), 0, size_t(maxb)));
    CUDA_CHECK(cudaDeviceSynchronize());
    p.st[0] = gpu::Stream(m.device);
    p.st[1] = gpu::Stream(m.device);
    const StreamMemOps ops;
    if (p.is_src)
      send_side(ctx, gate, p, ops, numa, double(k) / double(plan.intra.size()), double(k + 1) / double(plan.intra.size()));
    else
      receive_side(ctx, m.device, p, ops);
    CUDA_CHECK(cudaDeviceSynchronize());
    mpi::barrier();
  }
}

}  // namespace peerplan::profiler
