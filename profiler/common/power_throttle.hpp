#pragma once
// The power-throttle measurement's arithmetic (the GPU half is profiler/measure/pacing.cpp): from
// the times of one GEMM called back to back after an idle pause, when and by how much it slowed.
#include <array>
#include <vector>

#include "planner/topology/measurements.hpp"

namespace peerplan::profiler {

// call_s: each call's seconds, in order, the first right after the pause. boost: the median of the
// calls that started in the first 15 ms; sustained: the median of the last 40 % of calls; onset:
// the start of the first call after which a 5-call running median passes halfway from boost to
// sustained. Below a 2 % slowdown there is no throttle (factor 1, onset the whole run).
PowerThrottle analyse_power_throttle(const std::vector<double>& call_s);

// One call of a throttle mix: its class, when it started (seconds from the first call) and its time.
enum class MixClass { Gemm, Attention, Elementwise };
struct MixCall {
  MixClass cls = MixClass::Gemm;
  double start_s = 0, duration_s = 0;
};
// A mix's per-class factors, as analyse_power_throttle does for one GEMM: per class, the median of
// its calls that started in the first 15 ms (at least its first 2) over the median of its last 40 %.
// A class without calls keeps factor 1 (the pricer interpolates it from the other mixes: see
// complete_mixes); attention_share from the boost medians times the calls per class.
ThrottleMix analyse_throttle_mix(const std::vector<MixCall>& calls);
// Mixes ascending by share with each class that a mix did not run (no attention at share 0, no
// GEMM at share 1) set to its nearest neighbour's factor, so the pricer reads a complete table.
std::vector<ThrottleMix> complete_mixes(std::vector<ThrottleMix> mixes, const std::vector<std::array<bool, 3>>& ran);

}  // namespace peerplan::profiler
