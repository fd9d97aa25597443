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

bool launches_with_pdl() { return kernels::pdl::enabled() && kernels::pdl::device_supports(); }

void launch_empty_pdl(cudaStream_t s) {
  kernels::pdl::launch(empty_pdl_kernel, dim3(1), dim3(1), 0, s);
  CUDA_CHECK_LAUNCH("empty_pdl_kernel");
}

}  // namespace peerplan::gpu
