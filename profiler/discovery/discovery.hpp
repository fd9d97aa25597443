#pragma once
// Discovery: what the host is, before anything is timed. Fills a Machine (planner/topology/
// machine.hpp) with GPUs (CUDA runtime), directed peer capability, the PCIe tree, NUMA nodes and
// sockets (hwloc), NVLink per GPU (NVML, when present), and tool versions in meta.
#include "planner/topology/machine.hpp"

namespace peerplan::profiler {

Machine discover_machine();

// For every ordered pair reported capable: enable peer access, let a kernel on the source write a
// pattern into the destination's memory and verify it there; copy a pattern by copy engine and
// verify it too. Fills p2p[i][j].functional and .note; a capable pair that fails is "broken" and
// its peer access is disabled again so later stages never use it. Leaves peer access enabled on
// every working pair.
void check_p2p_functional(Machine& m);

}  // namespace peerplan::profiler
