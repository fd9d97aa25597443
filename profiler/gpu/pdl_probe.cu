#include "profiler/gpu/pdl_probe.hpp"

#include "profiler/gpu/cuda_check.hpp"
#include "profiler/kernels/pdl.cuh"

namespace peerplan::gpu {
namespace {

__global__ void empty_pdl_kernel() {
  kernels::pdl::wait();
  kernels::pdl::launch_dependents();
}

}  // namespace

// The launch's own decision (switch and device), not a copy of it: true when pdl::launch adds the attribute.
bool launches_with_pdl() {
  cudaLaunchAttribute attr[1];
  return kernels::pdl::append_attr(attr, 0) == 1;
}

void launch_empty_pdl(cudaStream_t s) {
  kernels::pdl::launch(empty_pdl_kernel, dim3(1), dim3(1), 0, s);
  CUDA_CHECK_LAUNCH("empty_pdl_kernel");
}

}  // namespace peerplan::gpu
