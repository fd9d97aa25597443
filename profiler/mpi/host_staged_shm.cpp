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
    const bool is_src = m.me == src;
    const int peer = is_src ? dst : src;
    const uint32_t seed = 0x88000000u + uint32_t(src * 16 + dst);
    // The source GPU's NUMA node on its host (the merged machine shifts NUMA indices per host).
    const int numa = m.ctx.machine.gpus[size_t(m.device)].numa;  // valid on the source rank, which places the memory
    std::string name = "/peerplan-" + std::to_string(m.job) + "-" + std::to_string(src) + "-" + std::to_string(dst);
    gpu::ScopedDevice dev(m.device);
    std::unique_ptr<SharedPinned> shm;
    int token = 0;
    if (is_src) {
      shm = std::make_unique<SharedPinned>(name, seg_bytes, true, numa);
      mpi::send_bytes(&token, sizeof token, peer, kTagShm);   // created
      mpi::recv_bytes(&token, sizeof token, peer, kTagShm);   // mapped by the destination
      shm_unlink(name.c_str());  // both hold it mapped; nothing is left in /dev/shm after a crash
    } else {
      mpi::recv_bytes(&token, sizeof token, peer, kTagShm);
      shm = std::make_unique<SharedPinned>(name, seg_bytes, false, -1);
      mpi::send_bytes(&token, sizeof token, peer, kTagShm);
    }
    Flags f{{shm->flag(0), shm->flag(64)}, {shm->flag(128), shm->flag(192)}};
    gpu::DeviceBuffer buf(m.device, size_t(maxb));
    if (is_src) gpu::launch_fill_pattern(buf.as<uint32_t>(), size_t(maxb) / 4, seed, nullptr);
    else CUDA_CHECK(cudaMemset(buf.get(), 0, size_t(maxb)));
    CUDA_CHECK(cudaDeviceSynchronize());
    gpu::Stream st[2] = {gpu::Stream(m.device), gpu::Stream(m.device)};
    Sequencer sq;
    const StreamMemOps ops;
    auto chunks = [&](int64_t bytes, auto&& each) {
      for (int64_t off = 0, i = 0; off < bytes; off += kChunk, ++i) each(int(i % 2), off, size_t(std::min(kChunk, bytes - off)));
    };
    if (is_src) {
      SweepSpec spec;
      spec.label = "gpu" + std::to_string(src) + "->shm->gpu" + std::to_string(dst);
      spec.sizes = ctx.plan.transfer_sizes;
      spec.expected_gbps = kExpectedGbps;
      spec.timing = &st[0];
      spec.others = {&st[1]};
      int64_t cur_bytes = -1;
      int calls = 0, reps = 0;
      spec.enqueue = [&](int64_t bytes) {
        if (bytes != cur_bytes) { cur_bytes = bytes; calls = 0; reps = reps_for(bytes, spec.expected_gbps, spec.region_target_s, spec.max_reps); }
        chunks(bytes, [&](int slot, int64_t off, size_t n) {
          uint32_t seq = ++sq.seq;
          if (sq.last[slot]) STREAM_OP_CHECK(ops.wait(st[slot], f.free[slot], sq.last[slot], CU_STREAM_WAIT_VALUE_GEQ));
          CUDA_CHECK(cudaMemcpyAsync(shm->data() + slot * kChunk, buf.as<char>() + off, n, cudaMemcpyDeviceToHost, st[slot]));
          STREAM_OP_CHECK(ops.write(st[slot], f.full[slot], seq, CU_STREAM_WRITE_VALUE_DEFAULT));
          sq.last[slot] = seq;
        });
        // Region end: the timing stream waits until the destination has drained both slots.
        if (++calls % reps == 0)
          for (int s = 0; s < 2; ++s)
            if (sq.last[s]) STREAM_OP_CHECK(ops.wait(st[0], f.free[s], sq.last[s], CU_STREAM_WAIT_VALUE_GEQ));
      };
      spec.verify = [&](int64_t) {
        unsigned long long bad = 0;
        mpi::recv_bytes(&bad, sizeof bad, peer, kTagBad);
        return size_t(bad);
      };
      TransferCurve c{src, dst, "host_staged", numa >= 0 ? "numa_local" : "", {}};
      c.points = sweep_transfer(ctx, gate, spec, double(k) / double(plan.intra.size()), double(k + 1) / double(plan.intra.size()));
      ctx.ms.transfers.push_back(std::move(c));
    } else {
      // The mirror of sweep_transfer's loop: same sizes, regions and reps, no timing.
      for (int64_t bytes : ctx.plan.transfer_sizes) {
        int reps = reps_for(bytes, kExpectedGbps, SweepSpec{}.region_target_s, SweepSpec{}.max_reps);
        for (int region = 0; region < ctx.plan.warmup + ctx.plan.samples; ++region)
          for (int r = 0; r < reps; ++r)
            chunks(bytes, [&](int slot, int64_t off, size_t n) {
              uint32_t seq = ++sq.seq;
              STREAM_OP_CHECK(ops.wait(st[slot], f.full[slot], seq, CU_STREAM_WAIT_VALUE_GEQ));
              CUDA_CHECK(cudaMemcpyAsync(buf.as<char>() + off, shm->data() + slot * kChunk, n, cudaMemcpyHostToDevice, st[slot]));
              STREAM_OP_CHECK(ops.write(st[slot], f.free[slot], seq, CU_STREAM_WRITE_VALUE_DEFAULT));
              sq.last[slot] = seq;
            });
        st[0].synchronize();
        st[1].synchronize();
        unsigned long long bad = gpu::count_pattern_errors(buf.get(), m.device, size_t(bytes) / 4, seed);
        mpi::send_bytes(&bad, sizeof bad, peer, kTagBad);
      }
    }
    CUDA_CHECK(cudaDeviceSynchronize());
    mpi::barrier();
  }
}

}  // namespace peerplan::profiler
