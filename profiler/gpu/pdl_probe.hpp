#pragma once
// Empty kernels launched as the executor launches its decode kernels (profiler/kernels/pdl.cuh), for the
// launch-gap measurement the simulator's per-kernel floor reads (measure/launch_overhead.cpp).
#include <cuda_runtime.h>

namespace peerplan::gpu {

// Whether the executor launches its decode kernels with PDL on the current device (switch on, sm_90+).
bool launches_with_pdl();
// An empty kernel that waits on griddepcontrol and releases its dependents, launched with the
// programmatic-serialization attribute (when launches_with_pdl()).
void launch_empty_pdl(cudaStream_t s);

}  // namespace peerplan::gpu
