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

namespace {
// Rounds of G GEMMs, A attentions and one elementwise call; every class at boost until `onset`,
// then slowed by its own factor.
std::vector<MixCall> mix_calls(int G, int A, double onset, double fg, double fa, double fe) {
  std::vector<MixCall> v;
  double t = 0;
  auto add = [&](MixClass c, double boost, double f) {
    const double d = t < onset ? boost : boost * f;
    v.push_back({c, t, d});
    t += d;
  };
  while (t < 1.5) {
    for (int i = 0; i < G; ++i) add(MixClass::Gemm, 250e-6, fg);
    for (int i = 0; i < A; ++i) add(MixClass::Attention, 1000e-6, fa);
    add(MixClass::Elementwise, 100e-6, fe);
  }
  return v;
}
}  // namespace

TEST(PowerThrottle, EachClassOfAMixGetsItsOwnFactor) {
  const ThrottleMix m = analyse_throttle_mix(mix_calls(4, 3, 0.050, 1.11, 1.18, 1.05));
  EXPECT_NEAR(m.gemm, 1.11, 1e-9);
  EXPECT_NEAR(m.attention, 1.18, 1e-9);
  EXPECT_NEAR(m.elementwise, 1.05, 1e-9);
  EXPECT_NEAR(m.attention_share, 3.0 / 4.0, 1e-9) << "attention / (GEMM + attention) at boost";
  const ThrottleMix g = analyse_throttle_mix(mix_calls(4, 0, 0.050, 1.19, 1.0, 1.06));
  EXPECT_EQ(g.attention_share, 0.0);
  EXPECT_EQ(g.attention, 1.0) << "no attention ran: factor left for complete_mixes";
}

TEST(PowerThrottle, CompleteMixesFillsClassesAMixDidNotRunFromTheNearestMix) {
  std::vector<ThrottleMix> m = {{1.0, 1.0, 1.17, 1.05}, {0.0, 1.19, 1.0, 1.06}, {0.5, 1.13, 1.2, 1.05}};
  const auto c = complete_mixes(m, {{false, true, true}, {true, false, true}, {true, true, true}});
  ASSERT_EQ(c.size(), 3u);
  EXPECT_EQ(c[0].attention_share, 0.0);
  EXPECT_EQ(c[0].attention, 1.2) << "share 0 ran no attention: the share-0.5 mix's";
  EXPECT_EQ(c[2].gemm, 1.13) << "share 1 ran no GEMM: the share-0.5 mix's";
  EXPECT_EQ(c[1].gemm, 1.13);
  EXPECT_THROW(complete_mixes(m, {}), RuntimeError);
}
