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

// Ceilings on every physical figure a machine or profile gives. Far above any hardware (NVLink 5
// is 900 GB/s per direction per GPU, HBM3e 8 TB/s, a B200 2.3 PFLOP/s dense BF16) and low enough
// that no figure can make the simulator's arithmetic degenerate (a 1e10 GB/s link made every
// transfer take 0 s and the event engine spin at one instant).
inline constexpr double kMaxBandwidthGbps = 1e5;     // 100 TB/s: links, HBM, host memory, measured curves
inline constexpr double kMinBandwidthGbps = 1e-3;    // 1 MB/s: a slower link is a typo
inline constexpr double kMaxLatencyUs = 1e6;         // 1 s per hop or per measured sample
inline constexpr double kMaxTflops = 1e5;            // 100 PFLOP/s per GPU
inline constexpr int64_t kMaxMemoryBytes = 1LL << 50;  // 1 PiB per GPU, and per measured transfer
inline constexpr double kMaxClockMhz = 1e5;
inline constexpr int kMaxNvlinks = 1024;
inline constexpr int kMaxSmCount = 1000000;

// Per-lane, per-direction GB/s of PCIe generation `gen` (0 if unknown).
double pcie_lane_gbps(int gen);

// Ids, links, capacities, p2p matrix shape. Fields are named as JSON pointers into the machine
// schema ("links/3/b"), so messages read the same whatever the source was.
void validate_structure(const Machine& m);

}  // namespace peerplan
