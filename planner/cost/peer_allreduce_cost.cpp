#include "planner/cost/peer_allreduce_cost.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "planner/core/error.hpp"
#include "planner/cost/curve.hpp"

namespace peerplan {

namespace {
// One-way signal latency between a and b: measured sm_pingpong (one-way) when present.
double signal_latency_s(int a, int b, const Route& r, const Measurements* meas) {
  if (meas)
    for (const LatencyPoint& l : meas->latencies)
      if (l.kind == "sm_pingpong" && ((l.src == a && l.dst == b) || (l.src == b && l.dst == a)) && l.time.median > 0)
        return l.time.median;
  return r.latency_s;
}
}  // namespace

CollectivePrice model_peer_allreduce(ArImpl impl, const std::vector<int>& gpus, double bytes, const Topology& topo,
                                     const Measurements* meas, const CostOptions& opt, bool nominal_graph) {
  if (impl != ArImpl::OneShot && impl != ArImpl::TwoShot)
    throw std::invalid_argument("model_peer_allreduce: one_shot or two_shot, got " + std::string(to_string(impl)));
  const int n = int(gpus.size());
  CollectivePrice p;
  p.algo = to_string(impl);
  if (n <= 1 || bytes <= 0) {
    p.source = CostSource::Measured;  // nothing to do: exact
    return p;
  }
  // Every GPU reads from every peer: n(n-1) flows (dst reads src), all at once.
  std::vector<std::vector<int>> flows;
  double lat = 0;
  for (int dst : gpus)
    for (int src : gpus) {
      if (src == dst) continue;
      Route r = topo.route(src, dst, TransferMode::PeerKernel);
      if (!r.valid || !topo.p2p_usable(src, dst))
        throw RuntimeError("peer all-reduce over gpu" + std::to_string(src) + " -> gpu" + std::to_string(dst) +
                           " needs P2P: " + (r.valid ? topo.p2p_why_not(src, dst) : r.why_invalid));
      flows.push_back(r.edges);
      lat = std::max(lat, signal_latency_s(src, dst, r, meas));
    }
  std::vector<double> cap(size_t(topo.edge_count()));
  for (int e = 0; e < topo.edge_count(); ++e) cap[size_t(e)] = topo.edge_props(e).capacity_Bps * opt.link_efficiency;
  std::vector<double> rates = max_min_rates(flows, cap);
  const double r = *std::min_element(rates.begin(), rates.end());
  const bool one = impl == ArImpl::OneShot;
  const double per_flow = one ? bytes : 2 * bytes / n;  // bytes each peer read moves
  p.seconds = opt.peer_allreduce_base_s + (one ? 2 : 3) * lat + per_flow / r;
  p.bus_Bps = bus_bytes(CollOp::AllReduce, n, bytes) / p.seconds;
  p.source = nominal_graph ? CostSource::Nominal : CostSource::Derived;
  for (const auto& f : flows)
    for (int e : f) p.edge_bytes.push_back({e, per_flow});
  return p;
}

CollectivePrice price_peer_allreduce(ArImpl impl, const std::vector<int>& gpus, double bytes, const Topology& topo,
                                     const Measurements* meas, const CostOptions& opt, bool nominal_graph,
                                     bool graph_launch) {
  CollectivePrice p = model_peer_allreduce(impl, gpus, bytes, topo, meas, opt, nominal_graph);
  if (bytes <= 0 || gpus.size() <= 1 || !meas) return p;
  const std::string algo = to_string(impl);
  if (const PeerAllReduceCurve* c = graph_or_stream_curve(meas->find_peer_allreduce(algo, gpus, true),
                                                          meas->find_peer_allreduce(algo, gpus), graph_launch, bytes))
    if (!c->points.empty()) {
      p.graph_timed = c->graph;
      CurveTime t = curve_time(c->points, bytes);
      p.seconds = t.seconds;
      p.source = t.source;
      p.bus_Bps = bus_bytes(CollOp::AllReduce, int(gpus.size()), bytes) / t.seconds;
      p.algo = std::string(to_string(impl)) + " measured";
    }
  return p;
}

}  // namespace peerplan
