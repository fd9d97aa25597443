#include "profiler/gpu/timing.hpp"

#include <cuda_bf16.h>

#include <vector>

namespace peerplan::gpu {
namespace {

__device__ __forceinline__ unsigned long long global_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__global__ void spin_kernel(volatile int* flag, volatile int* status, unsigned long long timeout_ns) {
  unsigned long long t0 = global_ns();
  while (*flag == 0) {
    if (global_ns() - t0 > timeout_ns) { *status = 1; break; }
  }
}

__global__ void sm_copy_kernel(int4* __restrict__ dst, const int4* __restrict__ src, size_t n) {
  size_t stride = size_t(gridDim.x) * blockDim.x;
  size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  // Unrolled by 4 so each thread keeps several 16-byte loads in flight (hides NVLink latency).
  for (; i + 3 * stride < n; i += 4 * stride) {
    int4 a = src[i], b = src[i + stride], c = src[i + 2 * stride], d = src[i + 3 * stride];
    dst[i] = a; dst[i + stride] = b; dst[i + 2 * stride] = c; dst[i + 3 * stride] = d;
  }
  for (; i < n; i += stride) dst[i] = src[i];
}

__global__ void fill_kernel(uint32_t* p, size_t n, uint32_t seed) {
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    p[i] = seed + uint32_t(i);
}

__global__ void check_kernel(const uint32_t* p, size_t n, uint32_t seed, unsigned long long* errors) {
  unsigned long long bad = 0;
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    bad += (p[i] != seed + uint32_t(i));
  if (bad) atomicAdd(errors, bad);
}

__global__ void empty_kernel() {}

__global__ void init_chase_kernel(uint64_t* buf, size_t n, size_t stride) {
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    buf[i] = (i + stride) % n;
}

__global__ void chase_kernel(const uint64_t* buf, int steps, uint64_t* sink) {
  uint64_t idx = 0;
  for (int s = 0; s < steps; ++s) idx = __ldcv(reinterpret_cast<const unsigned long long*>(buf) + idx);
  *sink = idx;
}

__global__ void ping_kernel(volatile int* local, volatile int* remote, int iters, unsigned long long* t, int* timed_out,
                            unsigned long long timeout_ns) {
  unsigned long long t0 = global_ns();
  for (int i = 1; i <= iters; ++i) {
    *remote = i;
    __threadfence_system();
    while (*local != i) {
      if (global_ns() - t0 > timeout_ns) { *timed_out = 1; return; }
    }
  }
  t[0] = t0;
  t[1] = global_ns();
}

__global__ void pong_kernel(volatile int* local, volatile int* remote, int iters, int* timed_out,
                            unsigned long long timeout_ns) {
  unsigned long long t0 = global_ns();
  for (int i = 1; i <= iters; ++i) {
    while (*local != i) {
      if (global_ns() - t0 > timeout_ns) { *timed_out = 1; return; }
    }
    *remote = i;
    __threadfence_system();
  }
}

__global__ void fill_float_kernel(float* p, size_t n, float v) {
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) p[i] = v;
}

__global__ void count_ne_float_kernel(const float* p, size_t n, float v, unsigned long long* errors) {
  unsigned long long bad = 0;
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    bad += (p[i] != v);
  if (bad) atomicAdd(errors, bad);
}

__global__ void fill_bf16_kernel(__nv_bfloat16* p, size_t n, uint32_t seed) {
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    uint32_t x = uint32_t(i) * 2654435761u ^ seed;
    x ^= x >> 13; x *= 0x5bd1e995u; x ^= x >> 15;
    p[i] = __float2bfloat16(float(x & 0xffff) / 32768.0f - 1.0f);
  }
}

int sm_count_current() {
  int dev = 0, sms = 0;
  CUDA_CHECK(cudaGetDevice(&dev));
  CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  return sms;
}

}  // namespace

BlockingGate::BlockingGate() {
  int* f = nullptr;
  int* st = nullptr;
  CUDA_CHECK(cudaHostAlloc(&f, sizeof(int), cudaHostAllocMapped | cudaHostAllocPortable));
  CUDA_CHECK(cudaHostAlloc(&st, sizeof(int), cudaHostAllocMapped | cudaHostAllocPortable));
  flag_ = f;
  status_ = st;
  *flag_ = 0;
  *status_ = 0;
}

BlockingGate::~BlockingGate() {
  if (flag_) { *flag_ = 1; cudaFreeHost(const_cast<int*>(flag_)); }
  if (status_) cudaFreeHost(const_cast<int*>(status_));
}

void BlockingGate::block(cudaStream_t s, int device, double timeout_ms) {
  ScopedDevice d(device);
  int* dflag = nullptr;
  int* dstatus = nullptr;
  CUDA_CHECK(cudaHostGetDevicePointer(reinterpret_cast<void**>(&dflag), const_cast<int*>(flag_), 0));
  CUDA_CHECK(cudaHostGetDevicePointer(reinterpret_cast<void**>(&dstatus), const_cast<int*>(status_), 0));
  *flag_ = 0;
  spin_kernel<<<1, 1, 0, s>>>(dflag, dstatus, (unsigned long long)(timeout_ms * 1e6));
  CUDA_CHECK_LAUNCH("spin_kernel");
}

void BlockingGate::release() {
  __atomic_store_n(const_cast<int*>(flag_), 1, __ATOMIC_SEQ_CST);
}

bool BlockingGate::timed_out() const { return *status_ != 0; }

double time_region(BlockingGate* gate, const Stream& timing, const std::vector<const Stream*>& others,
                   const std::function<void()>& enqueue, const std::function<void()>& before_release) {
  Event start(timing.device()), end(timing.device());
  std::vector<Event> joins;
  if (gate) gate->block(timing, timing.device());
  start.record(timing);
  for (const Stream* o : others) {
    ScopedDevice d(o->device());
    CUDA_CHECK(cudaStreamWaitEvent(*o, start, 0));
  }
  try {
    enqueue();
  } catch (...) {
    if (gate) gate->release();
    throw;
  }
  for (const Stream* o : others) {
    joins.emplace_back(o->device(), cudaEventDisableTiming);
    ScopedDevice d(o->device());
    joins.back().record(*o);
    CUDA_CHECK(cudaStreamWaitEvent(timing, joins.back(), 0));
  }
  end.record(timing);
  if (before_release) {
    try {
      before_release();
    } catch (...) {
      if (gate) gate->release();
      throw;
    }
  }
  if (gate) gate->release();
  end.synchronize();
  if (gate && gate->timed_out())
    throw RuntimeError("timing gate: the spin kernel timed out before the host released it (host stalled > 10 s)");
  return end.seconds_since(start);
}

void launch_sm_copy(void* dst, const void* src, size_t bytes, cudaStream_t s, int blocks) {
  if (blocks <= 0) blocks = 4 * sm_count_current();
  sm_copy_kernel<<<blocks, 512, 0, s>>>(static_cast<int4*>(dst), static_cast<const int4*>(src), bytes / 16);
  CUDA_CHECK_LAUNCH("sm_copy_kernel");
}

void launch_fill_pattern(uint32_t* p, size_t words, uint32_t seed, cudaStream_t s) {
  fill_kernel<<<4 * sm_count_current(), 256, 0, s>>>(p, words, seed);
  CUDA_CHECK_LAUNCH("fill_kernel");
}

void launch_check_pattern(const uint32_t* p, size_t words, uint32_t seed, unsigned long long* errors, cudaStream_t s) {
  check_kernel<<<4 * sm_count_current(), 256, 0, s>>>(p, words, seed, errors);
  CUDA_CHECK_LAUNCH("check_kernel");
}

void launch_empty(cudaStream_t s) {
  empty_kernel<<<1, 1, 0, s>>>();
  CUDA_CHECK_LAUNCH("empty_kernel");
}

void launch_pointer_chase(const uint64_t* buf, int steps, uint64_t* sink, cudaStream_t s) {
  chase_kernel<<<1, 1, 0, s>>>(buf, steps, sink);
  CUDA_CHECK_LAUNCH("chase_kernel");
}

void launch_init_chase(uint64_t* buf, size_t n, size_t stride_slots, cudaStream_t s) {
  init_chase_kernel<<<256, 256, 0, s>>>(buf, n, stride_slots);
  CUDA_CHECK_LAUNCH("init_chase_kernel");
}

void launch_ping(volatile int* local, volatile int* remote, int iters, unsigned long long* t, int* timed_out,
                 unsigned long long timeout_ns, cudaStream_t s) {
  ping_kernel<<<1, 1, 0, s>>>(local, remote, iters, t, timed_out, timeout_ns);
  CUDA_CHECK_LAUNCH("ping_kernel");
}

void launch_pong(volatile int* local, volatile int* remote, int iters, int* timed_out, unsigned long long timeout_ns,
                 cudaStream_t s) {
  pong_kernel<<<1, 1, 0, s>>>(local, remote, iters, timed_out, timeout_ns);
  CUDA_CHECK_LAUNCH("pong_kernel");
}

void launch_fill_float(float* p, size_t n, float v, cudaStream_t s) {
  fill_float_kernel<<<4 * sm_count_current(), 256, 0, s>>>(p, n, v);
  CUDA_CHECK_LAUNCH("fill_float_kernel");
}

void launch_count_ne_float(const float* p, size_t n, float v, unsigned long long* errors, cudaStream_t s) {
  count_ne_float_kernel<<<4 * sm_count_current(), 256, 0, s>>>(p, n, v, errors);
  CUDA_CHECK_LAUNCH("count_ne_float_kernel");
}

void launch_fill_bf16(void* p, size_t n, uint32_t seed, cudaStream_t s) {
  fill_bf16_kernel<<<4 * sm_count_current(), 256, 0, s>>>(static_cast<__nv_bfloat16*>(p), n, seed);
  CUDA_CHECK_LAUNCH("fill_bf16_kernel");
}

size_t count_pattern_errors(const void* dev_ptr, int device, size_t words, uint32_t seed) {
  ScopedDevice d(device);
  DeviceBuffer err(device, sizeof(unsigned long long));
  CUDA_CHECK(cudaMemset(err.get(), 0, sizeof(unsigned long long)));
  launch_check_pattern(static_cast<const uint32_t*>(dev_ptr), words, seed, err.as<unsigned long long>(), nullptr);
  unsigned long long h = 0;
  CUDA_CHECK(cudaMemcpy(&h, err.get(), sizeof(h), cudaMemcpyDeviceToHost));
  return size_t(h);
}

CapturedGraph::~CapturedGraph() { reset(); }

void CapturedGraph::reset() {
  // Destruction paths must not throw: a failure to free a graph is not worth a crash.
  if (exec_) cudaGraphExecDestroy(exec_);
  if (graph_) cudaGraphDestroy(graph_);
  exec_ = nullptr;
  graph_ = nullptr;
}

void CapturedGraph::capture(cudaStream_t s, const std::function<void()>& enqueue) {
  reset();
  CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeRelaxed));
  try {
    enqueue();
  } catch (...) {
    cudaGraph_t junk = nullptr;
    cudaStreamEndCapture(s, &junk);
    if (junk) cudaGraphDestroy(junk);
    throw;
  }
  CUDA_CHECK(cudaStreamEndCapture(s, &graph_));
  CUDA_CHECK(cudaGraphInstantiate(&exec_, graph_, 0));
  CUDA_CHECK(cudaGraphUpload(exec_, s));
}

void CapturedGraph::capture_group(const Stream& lead, const std::vector<const Stream*>& others,
                                  const std::function<void()>& enqueue) {
  // Fork / join events outlive the capture (they become graph edges, not nodes).
  std::vector<Event> forks, joins;
  forks.emplace_back(lead.device(), cudaEventDisableTiming);
  for (const Stream* o : others) joins.emplace_back(o->device(), cudaEventDisableTiming);
  ScopedDevice d(lead.device());
  capture(lead, [&] {
    {
      ScopedDevice dl(lead.device());
      CUDA_CHECK(cudaEventRecord(forks[0], lead));
    }
    for (const Stream* o : others) {
      ScopedDevice dd(o->device());
      CUDA_CHECK(cudaStreamWaitEvent(*o, forks[0], 0));
    }
    enqueue();
    for (size_t i = 0; i < others.size(); ++i) {
      {
        ScopedDevice dd(others[i]->device());
        CUDA_CHECK(cudaEventRecord(joins[i], *others[i]));
      }
      ScopedDevice dl(lead.device());
      CUDA_CHECK(cudaStreamWaitEvent(lead, joins[i], 0));
    }
  });
}

void CapturedGraph::launch(cudaStream_t s) const { CUDA_CHECK(cudaGraphLaunch(exec_, s)); }

}  // namespace peerplan::gpu
