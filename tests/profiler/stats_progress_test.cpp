#include <gtest/gtest.h>

#include "planner/topology/measurements.hpp"
#include "profiler/common/progress.hpp"

using namespace peerplan;
using namespace peerplan::profiler;

TEST(Stats, PercentilesInterpolateLikeNumpy) {
  // 1..20 us: numpy.percentile(x, 10) = 2.9, median 10.5, p90 18.1, p99 19.81.
  std::vector<double> s;
  for (int i = 20; i >= 1; --i) s.push_back(i * 1e-6);  // unsorted on purpose
  auto st = compute_stats(s);
  EXPECT_EQ(st.n, 20);
  EXPECT_NEAR(st.min, 1e-6, 1e-15);
  EXPECT_NEAR(st.max, 20e-6, 1e-15);
  EXPECT_NEAR(st.p10, 2.9e-6, 1e-12);
  EXPECT_NEAR(st.median, 10.5e-6, 1e-12);
  EXPECT_NEAR(st.p90, 18.1e-6, 1e-12);
  EXPECT_NEAR(st.p99, 19.81e-6, 1e-12);
  EXPECT_NEAR(st.mean, 10.5e-6, 1e-12);
}

TEST(Progress, EtaRescalesByObservedSpeed) {
  // Finished work estimated at 10 s took 20 s: the remaining 5 s estimate becomes 10 s.
  EXPECT_DOUBLE_EQ(eta_seconds(10, 20, 5), 10);
  // Nothing finished yet: trust the estimate.
  EXPECT_DOUBLE_EQ(eta_seconds(0, 0, 7), 7);
  EXPECT_DOUBLE_EQ(eta_seconds(10, 5, 0), 0);
}

TEST(Progress, RenderShowsBarPercentNameAndEta) {
  auto s = render_progress(0.5, "p2p_ce gpu0->gpu1 64 MiB", 12, 9, 10);
  EXPECT_NE(s.find("[#####.....]"), std::string::npos) << s;
  EXPECT_NE(s.find("50%"), std::string::npos) << s;
  EXPECT_NE(s.find("p2p_ce gpu0->gpu1"), std::string::npos) << s;
  EXPECT_NE(s.find("ETA 9s"), std::string::npos) << s;
  EXPECT_NE(render_progress(2.0, "x", 0, 0, 4).find("[####]"), std::string::npos) << "fractions clamp to 100 %";
}
