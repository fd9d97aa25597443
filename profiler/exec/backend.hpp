#pragma once
// The profiler's implementation of the planner's GPU backend (planner/validate/gpu_backend.hpp):
// the executor, host discovery and the kernel self-test, and under MPI the rank group (one
// process per GPU). Only the executable's entry point (profiler/app/main.cpp) creates it.
#include <memory>

#include "planner/validate/gpu_backend.hpp"

namespace peerplan::exec {

// Touches no GPU until a method is called (so `--help` works on a host without a driver).
std::unique_ptr<GpuBackend> make_cuda_backend();

}  // namespace peerplan::exec
