#pragma once
// Pricing from a measured time(size) curve: log-log interpolation between measured sizes (exact
// for power laws, so it follows both the latency-bound and the bandwidth-bound part), and an
// alpha-beta line t = alpha + bytes / beta fitted to the curve beyond the measured range.
#include <cstdint>
#include <vector>

#include "planner/cost/cost_source.hpp"
#include "planner/topology/measurements.hpp"

namespace peerplan {

struct AlphaBeta {
  double alpha_s = 0;     // fixed cost per transfer
  double beta_Bps = 0;    // asymptotic bandwidth (bytes/s); +inf if the curve shows none
  double at(double bytes) const { return alpha_s + bytes / beta_Bps; }
};

// Least-squares fit of t = alpha + bytes/beta minimising RELATIVE error over the points (so small
// sizes weigh as much as large ones). alpha is clamped to >= 0. Needs >= 1 point; with one point
// alpha = 0 and beta = bytes / time.
AlphaBeta fit_alpha_beta(const std::vector<CurvePoint>& points);

struct CurveTime {
  double seconds = 0;
  CostSource source = CostSource::Measured;
};

// Time of `bytes` from a curve (median times, points ascending in bytes, sizes > 0).
//  - exactly a measured size: Measured
//  - between two sizes: log-log interpolation, Interpolated
//  - above the largest: the largest point's time + extra bytes at the fitted beta (continuous), Extrapolated
//  - below the smallest: the smallest point's time scaled down along the fit, never below alpha, Extrapolated
// Throws std::invalid_argument for an empty curve.
CurveTime curve_time(const std::vector<CurvePoint>& points, double bytes);

}  // namespace peerplan
