#pragma once
// The current device's compute capability (major * 10 + minor), asked once per device: launches that need
// an architecture feature (programmatic dependent launch from 9.0, FP8 mma.sync from 8.9) check it on the
// host. Host-only; cheap after the first call (one cudaGetDevice).
#include <atomic>

#include <cuda_runtime.h>

#include "profiler/gpu/cuda_check.hpp"

namespace peerplan::gpu {

inline int current_compute_capability() {
  static std::atomic<int> known[64];  // per device, 0: not asked yet
  int dev = 0;
  CUDA_CHECK(cudaGetDevice(&dev));
  const bool cached = dev >= 0 && dev < 64;
  if (cached)
    if (const int cc = known[dev].load(std::memory_order_relaxed)) return cc;
  int major = 0, minor = 0;
  CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
  CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev));
  const int cc = major * 10 + minor;
  if (cached) known[dev].store(cc, std::memory_order_relaxed);
  return cc;
}

}  // namespace peerplan::gpu
