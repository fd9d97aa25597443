#include "planner/cost/curve.hpp"

#include <cmath>

#include <gtest/gtest.h>

using namespace peerplan;

namespace {
CurvePoint pt(int64_t bytes, double t) {
  CurvePoint p;
  p.bytes = bytes;
  p.time.median = t;
  return p;
}
// t = 10 us + bytes / 50 GB/s, exactly.
std::vector<CurvePoint> alpha_beta_curve() {
  std::vector<CurvePoint> v;
  for (int64_t b = 1024; b <= (64 << 20); b *= 4) v.push_back(pt(b, 10e-6 + double(b) / 50e9));
  return v;
}
}  // namespace

TEST(Curve, AlphaBetaFitRecoversAnExactLine) {
  AlphaBeta ab = fit_alpha_beta(alpha_beta_curve());
  EXPECT_NEAR(ab.alpha_s, 10e-6, 1e-9) << "points lie on t = 10us + n/50GB/s";
  EXPECT_NEAR(ab.beta_Bps / 50e9, 1.0, 1e-6);
}

TEST(Curve, MeasuredSizeIsReturnedExactly) {
  auto c = alpha_beta_curve();
  CurveTime t = curve_time(c, double(c[2].bytes));
  EXPECT_EQ(t.source, CostSource::Measured);
  EXPECT_DOUBLE_EQ(t.seconds, c[2].time.median);
}

TEST(Curve, BetweenSizesInterpolatesInLogLog) {
  // A pure power law t = n^0.5 is reproduced exactly by log-log interpolation.
  std::vector<CurvePoint> c = {pt(100, 10.0), pt(10000, 100.0)};
  CurveTime t = curve_time(c, 1000);
  EXPECT_EQ(t.source, CostSource::Interpolated);
  EXPECT_NEAR(t.seconds, std::sqrt(1000.0), 1e-9);
}

TEST(Curve, BeyondTheRangeFollowsTheAlphaBetaFit) {
  auto c = alpha_beta_curve();
  double big = 1e9;
  CurveTime t = curve_time(c, big);
  EXPECT_EQ(t.source, CostSource::Extrapolated);
  EXPECT_NEAR(t.seconds / (10e-6 + big / 50e9), 1.0, 1e-6) << "continues the line at 50 GB/s";
  CurveTime small = curve_time(c, 10);
  EXPECT_NEAR(small.seconds, 10e-6, 1e-7) << "below the range: the fixed cost alpha";
}
