#pragma once
// Internal to planner/topology: the structural checks every machine source shares, and the
// nominal figures used when a machine does not give them (stated assumptions, docs/schema.md).
#include "planner/topology/machine.hpp"

namespace peerplan {

inline constexpr double kNominalNvlinkHopS = 0.35e-6;
inline constexpr double kNominalPcieHopS = 0.25e-6;
inline constexpr double kNominalSmpHopS = 0.30e-6;
inline constexpr double kNominalNetworkHopS = 2.0e-6;
inline constexpr double kNominalMemoryS = 0.10e-6;

// Per-lane, per-direction GB/s of PCIe generation `gen` (0 if unknown).
double pcie_lane_gbps(int gen);

// Ids, links, capacities, p2p matrix shape. Fields are named as JSON pointers into the machine
// schema ("links/3/b"), so messages read the same whatever the source was.
void validate_structure(const Machine& m);

}  // namespace peerplan
