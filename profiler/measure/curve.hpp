#pragma once
// Shared sweep loop of the transfer measurements: for each size, warm-up regions, then `samples`
// timed regions (timing.hpp's gated fork/join), each running `reps` transfers back to back, as
// nvbandwidth does; then a check that the data arrived. One sample = region time / reps.
#include <functional>
#include <string>
#include <vector>

#include "profiler/gpu/raii.hpp"
#include "profiler/gpu/timing.hpp"
#include "profiler/measure/context.hpp"

namespace peerplan::profiler {

struct SweepSpec {
  std::string label;                 // progress text, e.g. "p2p_ce gpu0->gpu1"
  std::vector<int64_t> sizes;
  double expected_gbps = 100;        // sets reps per region for small sizes
  const gpu::Stream* timing = nullptr;
  std::vector<const gpu::Stream*> others;
  std::function<void(int64_t bytes)> enqueue;          // one transfer of `bytes`
  std::function<size_t(int64_t bytes)> verify;         // mismatching words after the timed loop (optional)
  double region_target_s = 200e-6;
  int max_reps = 64;
  bool gated = true;                 // false: no spin-kernel gate (see time_region)
  // MPI: runs before the gate opens (a barrier lines up ranks), and turns this rank's region time
  // into the sample (e.g. the max over the ranks that copy at once). Both optional.
  std::function<void()> before_release;
  std::function<double(double)> combine;
};

// Returns the points; throws RuntimeError naming the label and size if verification fails.
std::vector<CurvePoint> sweep_transfer(Context& ctx, gpu::BlockingGate& gate, const SweepSpec& spec,
                                       double progress_from = 0, double progress_to = 1);

// Buffers for a src -> dst curve: src filled with a pattern; dst zeroed. Sizes up to `bytes`.
struct PatternPair {
  gpu::DeviceBuffer src, dst;
  uint32_t seed = 0;
  PatternPair(int src_dev, int dst_dev, size_t bytes, uint32_t seed);
  size_t errors(int64_t bytes) const;  // words of dst[0, bytes) that differ from the pattern
};

}  // namespace peerplan::profiler
