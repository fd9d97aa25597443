#pragma once
// Collectives over a group whose GPUs sit on several hosts and that the profile has no measured
// curve for, priced the way NCCL runs them across nodes (an MPI profile measures the global full
// set and pairs; a TP4 over 2 hosts x 2 GPUs, say, is usually not measured):
//
//  all-reduce, hierarchically (per host m GPUs, H hosts, S bytes per rank):
//     t = t_rs(local, S)                                 intra-host reduce-scatter
//       + 2(H-1) * t_net(k * S / (m H))                  inter-host ring all-reduce of each GPU's
//                                                        S/m shard with its peers ("rails"), one step
//                                                        moving S/(mH) per rail; k rails share the
//                                                        most-shared edge (one NIC per host: k = m)
//       + t_ag(local, S)                                 intra-host all-gather
//  all-to-all (each rank sends S/n to every member):
//     t = max(t_a2a(local, S m / n), max over cross-host flows f of t_net(k_f * S / n))
//     the local and cross-host sends are one grouped send/recv in NCCL, so they run at once over
//     disjoint links (NVLink or PCIe peer vs NIC); k_f = flow f's alone-rate / its max-min rate
//     with every cross-host flow running.
//
// t_net is the measured `net_nccl` curve of the pair, else of the same pair of hosts, else the
// network route's nominal figures; t_rs / t_ag the local group's measured curve, else half its
// measured all-reduce (a ring all-reduce is a reduce-scatter then an all-gather of equal cost),
// else the graph's ring estimate. The three phases are summed (NCCL pipelines them by chunks, so
// this is an upper bound for large messages). The price is marked algo "hierarchical" with an
// `inferred` record (CostModel::provenance lists them): never a measurement.
// Other collectives across hosts keep the flat ring over network routes (NCCL runs all-gather,
// reduce-scatter and broadcast as rings across nodes).
#include <optional>
#include <vector>

#include "planner/cost/collective_cost.hpp"
#include "planner/cost/transfer_cost.hpp"

namespace peerplan {

// Group members by host, each in group order; hosts in order of their first member.
std::vector<std::vector<int>> members_by_host(const Topology& topo, const std::vector<int>& gpus);

// The closed forms above, as pure functions of their parts (unit-tested).
double hierarchical_allreduce_s(double local_rs_s, double net_step_s, int hosts, double local_ag_s);
// Bytes one inter-host all-reduce step puts through the most-shared edge.
double hierarchical_step_bytes(double bytes, int local, int hosts, double sharing);
double cross_host_alltoall_s(double local_s, double cross_s);

// Flows that run at once: how many times slower than alone the slowest one goes (max over flows
// of alone-bottleneck / max-min rate), >= 1. Routes must be valid.
double sharing_factor(const Topology& topo, const std::vector<Route>& routes);

// Prices AllReduce / AllToAll over a group spanning hosts as above; nullopt for other ops or a
// group on one host. `meas` may be null (nominal machine).
std::optional<CollectivePrice> price_cross_host_collective(OpKind op, const std::vector<int>& gpus, double bytes,
                                                           bool p2p, const Topology& topo, const Measurements* meas,
                                                           const CostOptions& opt, bool nominal_graph);

}  // namespace peerplan
