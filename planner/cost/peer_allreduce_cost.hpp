#pragma once
// Price of a one-shot or two-shot all-reduce over peer memory (issue 17; which one runs is
// choose_allreduce's, planner/plan/allreduce_rule.hpp). From the profile's "peer_allreduce" curve
// of that kernel and group when measured; otherwise a model over the group's P2P paths, marked
// Derived (Nominal on a nominal graph), which prediction_band counts as unbounded roofline time:
//
//   one-shot  every GPU reads the whole buffer S of each of its n-1 peers at once and sums:
//             t = base + 2 L + S / r        (barriers before reading and after, so the buffers
//                                            can be reused by the next call)
//   two-shot  reduce-scatter then all-gather through peer memory: each GPU reads its 1/n share
//             from every peer, sums it, then reads every peer's reduced share:
//             t = base + 3 L + 2 (S/n) / r  (barriers at start, between the phases, at the end)
//
//   r  the slowest of the n(n-1) peer reads running at once, shared max-min fairly over the
//      links at CostOptions::link_efficiency (what an NVSwitch or one PCIe switch gives each)
//   L  one signal through peer memory: the measured one-way sm_pingpong latency of the slowest
//      pair when the profile has it, else the route's latency
//   base  CostOptions::peer_allreduce_base_s: block dispatch, the local sum, the tail
#include <vector>

#include "planner/cost/collective_cost.hpp"
#include "planner/plan/allreduce_rule.hpp"
#include "planner/topology/measurements.hpp"

namespace peerplan {

// The model alone (no curve): for tests and for the profiler's comparison with what it measured.
// Throws RuntimeError when a pair of the group has no P2P route.
CollectivePrice model_peer_allreduce(ArImpl impl, const std::vector<int>& gpus, double bytes, const Topology& topo,
                                     const Measurements* meas, const CostOptions& opt, bool nominal_graph);

// The price: the measured curve of (impl, gpus) when the profile has one, else the model.
// impl must be OneShot or TwoShot. graph_launch: the op runs in a CUDA graph (graph_or_stream_curve).
CollectivePrice price_peer_allreduce(ArImpl impl, const std::vector<int>& gpus, double bytes, const Topology& topo,
                                     const Measurements* meas, const CostOptions& opt, bool nominal_graph,
                                     bool graph_launch = false);

}  // namespace peerplan
