#pragma once
// Discovery: what the host is, before anything is timed. One source for every view of the host:
// cuda_gpus() lists the GPUs as the CUDA runtime reports them; discover_machine() builds the
// profile's Machine on it (planner/topology/machine.hpp: plus directed peer capability, the PCIe
// tree, NUMA nodes and sockets through hwloc, NVLink per GPU through NVML, tool versions in meta);
// discover_host() is the validation preflight's view of it (planner/validate/preflight.hpp).
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "planner/topology/machine.hpp"
#include "planner/validate/preflight.hpp"

namespace peerplan::profiler {

// The CUDA-visible GPUs: id (CUDA ordinal), name, UUID ("GPU-..."), PCI bus id, memory, SMs,
// compute capability, SM clock, nominal HBM bandwidth. Empty when no GPU or driver is usable.
std::vector<GpuSpec> cuda_gpus();

// Driver API, CUDA runtime, NCCL and cuBLASLt versions: {"cuda_driver_api", "cuda_runtime",
// "nccl", "cublaslt"}.
nlohmann::json gpu_stack_versions();

std::string host_name();

// The profile of this host. Throws RuntimeError when no CUDA GPU is visible.
Machine discover_machine();

// This host for the validation preflight: its name and cuda_gpus() (name, UUID, memory); no GPUs
// when none is usable (the preflight then says so).
HostInfo discover_host();

// Versions and hardware for run reports: gpu_stack_versions() plus host, GPU names and the date.
nlohmann::json host_context();

// For every ordered pair reported capable: enable peer access, let a kernel on the source write a
// pattern into the destination's memory and verify it there; copy a pattern by copy engine and
// verify it too. Fills p2p[i][j].functional and .note; a capable pair that fails is "broken" and
// its peer access is disabled again so later stages never use it. Leaves peer access enabled on
// every working pair.
void check_p2p_functional(Machine& m);

}  // namespace peerplan::profiler
