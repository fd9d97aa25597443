#pragma once
// Clusters in the machine schema (docs/schema.md, "Clusters"): a machine file may describe N
// identical hosts with NICs instead of listing every vertex,
//
//   "cluster": {"hosts": 8, "host": "hgx-h100x8", "nics": "per_gpu", "nic_gbps": 50, "nic_latency_us": 5}
//
// and is expanded at load into the ordinary graph the rest of the planner reads (so routes, the
// hierarchical cross-host collectives and strategies see an N x 8 machine as if written by hand):
//  - GPU i of host h becomes gpu<h*G+i>; every other vertex v of the host becomes "h<h>-<v>";
//    CPU sockets' NUMA indices are offset per host so they stay unique;
//  - each host gets NICs "h<h>-rail<k>": one per GPU ("per_gpu", the rail-optimised HGX/DGX
//    layout: one 400 Gb/s NIC per GPU) or K per host (on the PCIe parents of GPUs 0, G/K, ...),
//    attached by PCIe where the GPU's own PCIe link ends (its switch); that attachment carries
//    min(the GPU's PCIe link, nic_gbps), so the NIC port is the bottleneck of everything it sends;
//  - every pair of NICs on different hosts is joined by a `network` link of nic_gbps (the fabric
//    as a non-blocking full mesh: the route GPU -> its NIC -> the peer's NIC -> GPU that
//    Topology::network_route walks; a NIC's flows to many peers share its port above).
// The host is a shipped machine name, a path (relative to the cluster file), or an inline machine
// object; it must be one nominal host (no network links, no measurements) with p2p as a policy.
#include "planner/core/json_in.hpp"
#include "planner/topology/machine.hpp"

namespace peerplan {

// Hosts and NICs a cluster may ask for: the full mesh has about (hosts*nics)^2/2 links.
inline constexpr int64_t kMaxClusterHosts = 256;
inline constexpr int64_t kMaxClusterNetworkLinks = 200'000;

// Fills m.gpus, m.nodes, m.links and m.p2p_policy from root["cluster"]; m.source_file names the
// cluster file. Throws InputError naming the cluster file and field (or the host file and its
// field when the host itself is wrong).
void expand_cluster(const JsonIn& root, Machine& m);

}  // namespace peerplan
