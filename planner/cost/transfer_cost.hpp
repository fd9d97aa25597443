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

namespace peerplan {

// The measurements' mode name for a transfer mode ("p2p_ce", "p2p_sm_write", "nop2p_runtime", "host_staged").
const char* measurement_mode(TransferMode m);

struct TransferPrice {
  double seconds = 0;       // alone on an idle route
  double alpha_s = 0;       // fixed part (latency, set-up)
  double rate_Bps = 0;      // bytes/s cap once streaming (seconds = alpha + bytes / rate)
  CostSource source = CostSource::Nominal;
};

// curve: the measured curve for (src, dst, mode), or nullptr. route: from Topology::route.
TransferPrice price_transfer(const Route& route, const TransferCurve* curve, double bytes, const CostOptions& opt);

}  // namespace peerplan
