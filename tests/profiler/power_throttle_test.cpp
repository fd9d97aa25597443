// The power-throttle arithmetic on synthetic call times shaped as an H200 measured them
// (bench/power/clock_response.py, session 14: 262 us at boost for ~50 ms, then ~308 us).
#include <gtest/gtest.h>

#include "planner/core/error.hpp"
#include "profiler/common/power_throttle.hpp"

using namespace peerplan;
using namespace peerplan::profiler;

namespace {
std::vector<double> calls(double boost, double hot, double onset_s, double total_s) {
  std::vector<double> v;
  double t = 0;
  while (t < total_s) {
    const double c = t < onset_s ? boost : hot;
    v.push_back(c);
    t += c;
  }
  return v;
}
}  // namespace

TEST(PowerThrottle, FindsTheOnsetAndTheSustainedFactor) {
  const PowerThrottle p = analyse_power_throttle(calls(262e-6, 308e-6, 0.050, 1.5));
  EXPECT_NEAR(p.boost_s, 262e-6, 1e-9);
  EXPECT_NEAR(p.sustained_s, 308e-6, 1e-9);
  EXPECT_NEAR(p.factor, 308.0 / 262.0, 1e-6);
  EXPECT_NEAR(p.onset_s, 0.050, 0.001) << "the first slow call starts within a call of 50 ms";
}

TEST(PowerThrottle, AnOutlierCallIsNoOnset) {
  std::vector<double> v = calls(262e-6, 308e-6, 0.050, 1.5);
  v[10] = 2e-3;  // one slow call at ~2.6 ms (a host hiccup seen by the events)
  EXPECT_NEAR(analyse_power_throttle(v).onset_s, 0.050, 0.002);
}

TEST(PowerThrottle, NoSlowdownMeansNoThrottle) {
  const std::vector<double> v = calls(262e-6, 264e-6, 0.050, 1.5);  // < 2 %: noise, not the power cap
  const PowerThrottle p = analyse_power_throttle(v);
  EXPECT_DOUBLE_EQ(p.factor, 1.0);
  EXPECT_GT(p.onset_s, 1.4) << "never within the run";
}

TEST(PowerThrottle, TooFewCallsIsAnError) {
  EXPECT_THROW(analyse_power_throttle(std::vector<double>(5, 1e-3)), RuntimeError);
}
