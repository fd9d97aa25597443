#pragma once
// Which measured curve a transfer between two GPUs is read from: one rule for the cost model's
// transfer pricer (planner/cost/transfer_cost.hpp) and for the views of a machine (render.hpp),
// so `topo` shows the figures the simulator prices from.
#include "planner/topology/measurements.hpp"
#include "planner/topology/topology.hpp"

namespace peerplan {

// The measurements' mode name for a transfer mode ("p2p_ce", "p2p_sm_write", "nop2p_runtime", "host_staged").
const char* measurement_mode(TransferMode m);

// The measured transfer curve between GPUs on different hosts: the pair's `net_nccl` curve, else
// the one measured for the same ordered pair of hosts (an MPI profile samples one pair per pair
// of hosts: docs/mpi.md); nullptr when neither exists.
const TransferCurve* find_network_curve(const Topology& topo, const Measurements* meas, int src, int dst);

// The curve a transfer src -> dst in `mode` is priced from: across hosts the network curve above;
// on one host the pair's curve of the mode (host-staged: the NUMA-local variant when there is
// one, as the executor pins its staging buffers on the source's socket). nullptr: none measured
// (the route's nominal figures apply), or a machine without measurements.
const TransferCurve* pair_transfer_curve(const Topology& topo, int src, int dst, TransferMode mode);

}  // namespace peerplan
