#pragma once
// The power-throttle measurement's arithmetic (the GPU half is profiler/measure/pacing.cpp): from
// the times of one GEMM called back to back after an idle pause, when and by how much it slowed.
#include <vector>

#include "planner/topology/measurements.hpp"

namespace peerplan::profiler {

// call_s: each call's seconds, in order, the first right after the pause. boost: the median of the
// calls that started in the first 15 ms; sustained: the median of the last 40 % of calls; onset:
// the start of the first call after which a 5-call running median passes halfway from boost to
// sustained. Below a 2 % slowdown there is no throttle (factor 1, onset the whole run).
PowerThrottle analyse_power_throttle(const std::vector<double>& call_s);

}  // namespace peerplan::profiler
