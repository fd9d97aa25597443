#include "planner/cost/collective_cost.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

#include "planner/core/error.hpp"
#include "planner/cost/curve.hpp"

namespace peerplan {

namespace {
int ring_steps(OpKind op, int n) {
  if (n <= 1) return 0;
  return op == OpKind::AllReduce ? 2 * (n - 1) : n - 1;
}
}  // namespace

double ring_time_s(OpKind op, int n, double bytes, double bus_Bps, double step_latency_s, double base_latency_s) {
  if (n <= 1) return 0;
  return base_latency_s + ring_steps(op, n) * step_latency_s + bus_bytes(coll_op(op), n, bytes) / bus_Bps;
}

double tree_allreduce_time_s(int n, double bytes, double bus_Bps, double step_latency_s, double base_latency_s) {
  if (n <= 1) return 0;
  double depth = std::ceil(std::log2(double(n)));
  return base_latency_s + 2 * depth * step_latency_s + 2 * bytes / bus_Bps;
}

double ring_bus_bandwidth(const Topology& topo, const std::vector<int>& gpus, bool p2p, double eff,
                          double* latency_s, std::vector<std::vector<int>>* edges) {
  const int n = int(gpus.size());
  std::vector<std::vector<int>> flows;
  double lat = 0;
  for (int i = 0; i < n; ++i) {
    int a = gpus[size_t(i)], b = gpus[size_t((i + 1) % n)];
    if (a == b) continue;
    bool peer = p2p && topo.p2p_usable(a, b);
    Route r = topo.route(a, b, peer ? TransferMode::PeerCopyEngine : TransferMode::HostStaged);
    if (!r.valid) throw RuntimeError("no route for a ring step gpu" + std::to_string(a) + " -> gpu" + std::to_string(b) + ": " + r.why_invalid);
    flows.push_back(r.edges);
    lat = std::max(lat, r.latency_s);
  }
  if (latency_s) *latency_s = lat;
  if (edges) *edges = flows;
  if (flows.empty()) return std::numeric_limits<double>::infinity();
  std::vector<double> cap(size_t(topo.edge_count()));
  for (int e = 0; e < topo.edge_count(); ++e) cap[size_t(e)] = topo.edge_props(e).capacity_Bps * eff;
  std::vector<double> rates = max_min_rates(flows, cap);
  return *std::min_element(rates.begin(), rates.end());
}

CollectivePrice price_collective(OpKind op, const std::vector<int>& gpus, double bytes, bool p2p,
                                 const Topology& topo, const std::vector<CurvePoint>* measured,
                                 const CostOptions& opt, bool nominal_graph) {
  const int n = int(gpus.size());
  CollectivePrice p;
  if (n <= 1 || bytes <= 0) {
    p.source = CostSource::Measured;  // nothing to do: exact
    p.algo = "none";
    return p;
  }
  double lat = 0;
  std::vector<std::vector<int>> hops;
  double bus = ring_bus_bandwidth(topo, gpus, p2p, opt.link_efficiency, &lat, &hops);
  // Link load: each ring hop carries factor * bytes (all-to-all: its share to every peer, spread
  // over the ring's links in this approximation).
  double per_hop = bus_bytes(coll_op(op), n, bytes);
  for (const auto& h : hops)
    for (int e : h) p.edge_bytes.push_back({e, per_hop});

  if (measured && !measured->empty()) {
    CurveTime t = curve_time(*measured, bytes);
    p.seconds = t.seconds;
    p.source = t.source;
    p.algo = "measured";
    p.bus_Bps = bus_bytes(coll_op(op), n, bytes) / t.seconds;
    return p;
  }
  double step = lat + opt.nccl_step_latency_s;
  double ring = ring_time_s(op, n, bytes, bus, step, opt.nccl_base_latency_s);
  p.seconds = ring;
  p.algo = "ring";
  if (op == OpKind::AllReduce && n > 2) {
    double tree = tree_allreduce_time_s(n, bytes, bus, step, opt.nccl_base_latency_s);
    if (tree < ring) {
      p.seconds = tree;
      p.algo = "tree";
    }
  }
  p.bus_Bps = bus_bytes(coll_op(op), n, bytes) / p.seconds;
  p.source = nominal_graph ? CostSource::Nominal : CostSource::Derived;
  return p;
}

}  // namespace peerplan
