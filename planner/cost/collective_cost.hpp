#pragma once
// Collective costs. nccl-tests' conventions (planner/topology/collective.hpp: names, size and
// bus-bandwidth factor, defined once): `bytes` is the per-rank buffer ("size"), a ring moves
// bus_bytes = factor * size per hop. A measured NCCL curve for the group is used when the profile has one;
// otherwise a ring (and, for all-reduce, a tree) estimate over the graph, whichever is faster, as
// NCCL's tuner picks.
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "planner/compile/op_graph.hpp"
#include "planner/cost/cost_options.hpp"
#include "planner/cost/cost_source.hpp"
#include "planner/topology/topology.hpp"

namespace peerplan {

// Time of a ring collective moving factor*bytes per rank at bus_Bps, with `steps` latency hops.
double ring_time_s(OpKind op, int n, double bytes, double bus_Bps, double step_latency_s, double base_latency_s);
// Tree all-reduce (reduce then broadcast, pipelined): 2 * bytes over the slowest tree link plus
// 2 * ceil(log2 n) latency hops.
double tree_allreduce_time_s(int n, double bytes, double bus_Bps, double step_latency_s, double base_latency_s);

// Every rank's ring flow (gpus[i] -> gpus[i+1]) running at once, shared max-min fairly: the
// slowest flow's rate is the ring's bus bandwidth. Routes use P2P when allowed and usable, the
// host-staged path otherwise (what NCCL's SHM transport crosses). `latency_s` gets the slowest
// hop's latency. Returns the routes' edges in `edges` (one list per ring hop).
double ring_bus_bandwidth(const Topology& topo, const std::vector<int>& gpus, bool p2p, double link_efficiency,
                          double* latency_s, std::vector<std::vector<int>>* edges = nullptr);

struct CollectivePrice {
  double seconds = 0;
  CostSource source = CostSource::Nominal;
  double bus_Bps = 0;       // achieved bus bandwidth (nccl-tests busBw)
  std::string algo;         // "measured", "ring", "tree", "hierarchical" (cross_host_collective.hpp)
  // Hierarchical: what the price was inferred from (op, gpus, hosts, rule, parts); null otherwise.
  nlohmann::json inferred;
  // Bytes each directed edge carries (edge index, bytes), for link utilisation.
  std::vector<std::pair<int, double>> edge_bytes;
  // From a curve timed inside a CUDA graph (CollectiveCurve::graph): the in-graph gap is in it.
  bool graph_timed = false;
};

// The curve to price a collective of `bytes` from: when the op runs in a CUDA graph, the graph-timed
// curve if the profile has one reaching `bytes` (it is measured at decode sizes only), else `stream`.
template <class Curve>
const Curve* graph_or_stream_curve(const Curve* graph, const Curve* stream, bool graph_launch, double bytes) {
  if (graph_launch && graph && !graph->points.empty() && bytes <= double(graph->points.back().bytes)) return graph;
  return stream;
}

// measured: the profile's curve for this op and group (nullptr if none). `nominal_graph` says the
// graph's capacities are nominal (no transfer measurements), which makes an estimate Nominal
// rather than Derived.
CollectivePrice price_collective(OpKind op, const std::vector<int>& gpus, double bytes, bool p2p,
                                 const Topology& topo, const std::vector<CurvePoint>* measured,
                                 const CostOptions& opt, bool nominal_graph);

}  // namespace peerplan
