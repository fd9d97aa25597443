#pragma once
// The human summary printed at the end of `peerplan profile` (and by tests against a fixture):
// one table per kind of figure, largest-size medians and best values, P2P matrix, versions.
#include <string>

#include "planner/topology/machine.hpp"

namespace peerplan::profiler {

std::string summary_table(const Machine& m);

// GB/s at the largest measured size (median time) and the best GB/s over all sizes.
struct CurvePeak { int64_t bytes = 0; double gbps_at_max = 0, gbps_best = 0; };
CurvePeak curve_peak(const std::vector<CurvePoint>& pts);

}  // namespace peerplan::profiler
