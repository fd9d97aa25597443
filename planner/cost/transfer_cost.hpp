#pragma once
// Point-to-point transfer costs: the profile's curve for that route and mode when measured, the
// route's nominal bottleneck otherwise. The result is an alpha (fixed latency) plus a rate cap, so
// the event engine can let concurrent transfers share edges (max-min) while a lone transfer takes
// exactly the measured time.
#include <string>

#include "planner/cost/cost_options.hpp"
#include "planner/cost/cost_source.hpp"
#include "planner/topology/measurements.hpp"
#include "planner/topology/topology.hpp"
#include "planner/topology/transfer_curves.hpp"

namespace peerplan {

struct TransferPrice {
  double seconds = 0;       // alone on an idle route
  double alpha_s = 0;       // fixed part (latency, set-up)
  double rate_Bps = 0;      // bytes/s cap once streaming (seconds = alpha + bytes / rate)
  CostSource source = CostSource::Nominal;
};

// curve: the measured curve for (src, dst, mode), or nullptr. route: from Topology::route.
TransferPrice price_transfer(const Route& route, const TransferCurve* curve, double bytes, const CostOptions& opt);

// THE price of moving `bytes` from GPU src to dst in `mode`: what the simulator's sends
// (CostModel::transfer) and a strategy's machine.transfer_time use. The curve is the one
// pair_transfer_curve picks (topology/transfer_curves.hpp, which the topology views read too),
// else none (the route's nominal figures). src == dst moves nothing (valid, 0 s, exact). An
// invalid route comes back with route.valid false and no price.
struct PairTransfer {
  Route route;
  TransferPrice price;
  const TransferCurve* curve = nullptr;  // what it was priced from; nullptr: nominal
};
PairTransfer price_pair_transfer(const Topology& topo, int src, int dst, TransferMode mode, double bytes,
                                 const CostOptions& opt);

}  // namespace peerplan
