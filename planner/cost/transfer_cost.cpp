#include "planner/cost/transfer_cost.hpp"

#include <algorithm>
#include <limits>

#include "planner/cost/curve.hpp"

namespace peerplan {

TransferPrice price_transfer(const Route& route, const TransferCurve* curve, double bytes, const CostOptions& opt) {
  TransferPrice p;
  bytes = std::max(bytes, 0.0);
  if (curve && !curve->points.empty()) {
    CurveTime t = curve_time(curve->points, std::max(bytes, 1.0));
    AlphaBeta ab = fit_alpha_beta(curve->points);
    p.seconds = t.seconds;
    p.source = t.source;
    // Keep alpha below the time so a lone transfer reproduces the curve exactly.
    p.alpha_s = std::min(ab.alpha_s, 0.5 * t.seconds);
    p.rate_Bps = bytes > 0 ? bytes / (t.seconds - p.alpha_s) : std::numeric_limits<double>::infinity();
    return p;
  }
  bool staged = route.mode == TransferMode::HostStaged || route.mode == TransferMode::RuntimeNoP2P;
  p.alpha_s = route.latency_s + (staged ? opt.host_stage_setup_s : opt.copy_setup_s);
  p.rate_Bps = route.bottleneck_Bps * opt.link_efficiency;
  p.seconds = p.alpha_s + (p.rate_Bps > 0 ? bytes / p.rate_Bps : 0);
  p.source = CostSource::Nominal;
  return p;
}

PairTransfer price_pair_transfer(const Topology& topo, int src, int dst, TransferMode mode, double bytes,
                                 const CostOptions& opt) {
  PairTransfer t;
  if (src == dst) {  // same GPU: no transfer at all
    t.route.valid = true;
    t.route.mode = mode;
    t.price.source = CostSource::Measured;
    return t;
  }
  t.route = topo.route(src, dst, mode);
  if (!t.route.valid) return t;
  t.curve = pair_transfer_curve(topo, src, dst, mode);
  t.price = price_transfer(t.route, t.curve, bytes, opt);
  return t;
}

}  // namespace peerplan
