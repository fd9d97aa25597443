#pragma once
// Timing the way nvbandwidth does: a spin kernel blocks the stream on a host-memory flag, the
// timed work is enqueued behind it between two events, then the host releases the flag. The GPU
// therefore sees the whole batch at once, and CPU launch overhead falls outside the events.
// Work on other streams/devices joins through events (fork/join on the timing stream), so one
// pair of events on one device brackets multi-stream and multi-device work.
#include <cuda_runtime.h>

#include <cstdint>
#include <functional>
#include <vector>

#include "profiler/gpu/raii.hpp"

namespace peerplan::gpu {

// A host-mapped flag that spin kernels wait on. One gate can block several streams at once
// (one spin kernel each); release() lets them all go. The spin kernel gives up after
// timeout_ms so a host-side exception can never leave a GPU spinning forever.
class BlockingGate {
 public:
  BlockingGate();
  ~BlockingGate();
  BlockingGate(const BlockingGate&) = delete;
  BlockingGate& operator=(const BlockingGate&) = delete;
  void block(cudaStream_t s, int device, double timeout_ms = 10000);  // enqueue a spin kernel
  void release();  // let every blocked stream go (and re-arm for the next block)
  bool timed_out() const;  // a spin kernel gave up before release (timings are then invalid)

 private:
  volatile int* flag_ = nullptr;   // host-mapped, cudaHostAllocMapped
  volatile int* status_ = nullptr; // set to 1 by a spin kernel that timed out
};

// Times `enqueue` (which puts work on `timing` and optionally on `others`) with events on the
// timing stream; others wait for the start event and the timing stream waits for them at the end.
// Returns seconds between the events. gate == nullptr: no blocking (for paths the driver may
// stage synchronously, which would deadlock behind a spinning stream).
// before_release runs after everything is enqueued and before the gate opens: an MPI barrier there
// lines up the start of work that other processes time on their own GPUs.
double time_region(BlockingGate* gate, const Stream& timing, const std::vector<const Stream*>& others,
                   const std::function<void()>& enqueue, const std::function<void()>& before_release = {});

// An instantiated CUDA graph of captured calls, destroyed with its owner: how the profiler times
// what the executor replays as graphs (decode steps): capture `reps` calls once, then time_region a
// launch of the graph and divide. Relaxed capture mode, as the executor's graphs (engine_graph.cpp).
class CapturedGraph {
 public:
  CapturedGraph() = default;
  ~CapturedGraph();
  CapturedGraph(const CapturedGraph&) = delete;
  CapturedGraph& operator=(const CapturedGraph&) = delete;
  // Captures `enqueue` on `s`, then instantiates and uploads the graph (replacing any earlier one).
  // A throw inside `enqueue` ends the capture first and propagates.
  void capture(cudaStream_t s, const std::function<void()>& enqueue);
  // One graph over several GPUs, as the executor captures a tensor-parallel stage (engine_graph.cpp):
  // captured on `lead`; each of `others` forks from it before `enqueue` and joins it after. Launch
  // it on `lead`.
  void capture_group(const Stream& lead, const std::vector<const Stream*>& others, const std::function<void()>& enqueue);
  void launch(cudaStream_t s) const;
  bool empty() const { return exec_ == nullptr; }

 private:
  void reset();
  cudaGraph_t graph_ = nullptr;
  cudaGraphExec_t exec_ = nullptr;
};

// Kernels used by the measurements (timing.cu).
// Copies `bytes` (a multiple of 16, 16-byte aligned) from src to dst with SM loads/stores; src or
// dst may be a peer's memory (peer access enabled). blocks = 0: 4 per SM of the current device.
void launch_sm_copy(void* dst, const void* src, size_t bytes, cudaStream_t s, int blocks = 0);
// Fills `words` 32-bit words with seed + index (a pattern a copy must reproduce exactly).
void launch_fill_pattern(uint32_t* p, size_t words, uint32_t seed, cudaStream_t s);
// Counts words that differ from seed + index into *errors (device memory, zeroed by the caller).
void launch_check_pattern(const uint32_t* p, size_t words, uint32_t seed, unsigned long long* errors, cudaStream_t s);
// An empty kernel, for launch-overhead measurements.
void launch_empty(cudaStream_t s);
// Dependent-load pointer chase over `buf` (nvbandwidth's latency_sm): `steps` loads, each through
// the volatile (uncached) path; the result is stored to *sink so the chain is not optimised away.
void launch_pointer_chase(const uint64_t* buf, int steps, uint64_t* sink, cudaStream_t s);
// Prepares `buf` (`n` 64-bit slots, in any device's memory) as a chain with `stride_bytes` between hops.
void launch_init_chase(uint64_t* buf, size_t n, size_t stride_slots, cudaStream_t s);
// Ping-pong: the "ping" kernel writes i to *remote (the peer's flag) and waits until *local == i,
// `iters` times; "pong" mirrors it. Both give up after timeout_ns (recorded in *timed_out).
// The ping kernel records globaltimer at start and end into t[0], t[1].
void launch_ping(volatile int* local, volatile int* remote, int iters, unsigned long long* t, int* timed_out,
                 unsigned long long timeout_ns, cudaStream_t s);
void launch_pong(volatile int* local, volatile int* remote, int iters, int* timed_out, unsigned long long timeout_ns,
                 cudaStream_t s);

// Fills n floats with v; counts floats of p[0, n) that differ from v into *errors.
void launch_fill_float(float* p, size_t n, float v, cudaStream_t s);
void launch_count_ne_float(const float* p, size_t n, float v, unsigned long long* errors, cudaStream_t s);
// Fills n bf16 values with a deterministic pseudo-random pattern in [-1, 1) (not zeros: zeros make
// tensor cores run faster than real data would).
void launch_fill_bf16(void* p, size_t n, uint32_t seed, cudaStream_t s);

// Copies `words` 32-bit words from dst back to the host and counts mismatches against seed + index.
// Used after every timed loop: a bandwidth of a copy that lost data is not a bandwidth.
size_t count_pattern_errors(const void* dev_ptr, int device, size_t words, uint32_t seed);

}  // namespace peerplan::gpu
