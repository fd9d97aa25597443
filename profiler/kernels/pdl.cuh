#pragma once
// Programmatic dependent launch (Hopper, CUDA 12.3+ in graphs): a kernel launched with it may start
// while the kernel before it in the stream finishes, so its launch and the loads that need nothing
// from that kernel (weights) overlap the other's tail. TensorRT-LLM and FlashInfer launch their
// decode kernels this way on sm_90; at batch 1 a decode step is ~10-17 kernels a layer of 2-20 us,
// where that tail is a visible share (docs/moe_executor.md, "Programmatic dependent launch").
//
// The contract, per kernel launched through pdl::launch:
//   - it calls pdl::wait() before it reads anything an earlier kernel of the stream wrote (or
//     writes anything an earlier kernel reads): until then only read-only inputs (weights, its
//     own arguments) may be touched;
//   - it calls pdl::launch_dependents() after that wait, letting the next kernel be scheduled;
//   - a kernel without the wait must not be launched through pdl::launch.
// Weights read before the wait must be complete before the launch: the executor synchronises after
// creating them (Engine::settle_new_weights), outside any graph capture.
// wait() returns once every earlier grid has completed and its writes are visible, so a chain of
// such kernels keeps stream order. On by default (PEERPLAN_PDL=0 turns it off): the profile times the
// decode kernels the same way and records it (meta executor_launch), and validate warns when a profile
// was timed the other way.
#include <cuda_runtime.h>

#include <utility>

#include "profiler/common/pdl_switch.hpp"
#include "profiler/gpu/cuda_check.hpp"
#include "profiler/gpu/device_caps.hpp"

namespace peerplan::kernels::pdl {

__device__ __forceinline__ void wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

__device__ __forceinline__ void launch_dependents() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// Whether the current device takes the launch attribute (sm_90+), asked once per device.
inline bool device_supports() { return supported(gpu::current_compute_capability() / 10); }

// Appends the programmatic-serialization attribute to attrs[n] when enabled and the device takes it;
// returns the new count (for launches that carry other attributes too, e.g. a cluster dimension).
inline unsigned append_attr(cudaLaunchAttribute* attrs, unsigned n) {
  if (!enabled() || !device_supports()) return n;
  attrs[n].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attrs[n].val.programmaticStreamSerializationAllowed = 1;
  return n + 1;
}

// kernel<<<grid, block, smem, stream>>>(args...), with the programmatic-serialization attribute
// when enabled on an sm_90+ device (before sm_90, wait() and launch_dependents() compile to nothing).
template <typename... P, typename... A>
void launch(void (*kernel)(P...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream, A&&... args) {
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
  cudaLaunchAttribute attr[1];
  cfg.attrs = attr;
  cfg.numAttrs = append_attr(attr, 0);
  CUDA_CHECK(cudaLaunchKernelEx(&cfg, kernel, std::forward<A>(args)...));
}

}  // namespace peerplan::kernels::pdl
