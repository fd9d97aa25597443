// The error band of a prediction (planner/cost/prediction_band.hpp): known answers for the rule
// band = measured bound + fitted share x fitted band; lower bound only past the covered roofline share.
#include <gtest/gtest.h>

#include "planner/cost/prediction_band.hpp"

namespace peerplan {
namespace {

std::array<double, kCostSourceCount> shares(std::initializer_list<std::pair<CostSource, double>> l) {
  std::array<double, kCostSourceCount> f{};
  for (auto [s, v] : l) f[size_t(s)] = v;
  return f;
}

TEST(PredictionBand, AllMeasuredIsTheMeasuredBound) {
  PredictionBand b = prediction_band(shares({{CostSource::Measured, 0.6}, {CostSource::Interpolated, 0.4}}), -1);
  ASSERT_TRUE(b.known);
  EXPECT_FALSE(b.lower_bound_only);
  EXPECT_DOUBLE_EQ(b.step_relative, BandRule{}.measured_step);  // 5 %
  EXPECT_DOUBLE_EQ(b.ttft_relative, BandRule{}.measured_ttft);  // 10 %
  EXPECT_DOUBLE_EQ(b.measured_share, 1.0);
}

TEST(PredictionBand, HalfFittedAtEightHalfMeasuredAtThree) {
  BandRule r;
  r.measured_step = 0.03;
  r.measured_ttft = 0.03;
  PredictionBand b = prediction_band(shares({{CostSource::Fitted, 0.5}, {CostSource::Measured, 0.5}}), 0.08, r);
  // 3 % + 0.5 x 8 % = 7 %: the measured bound holds for the whole step, the fit adds its own error on its share.
  EXPECT_NEAR(b.step_relative, 0.07, 1e-12);
  EXPECT_NEAR(b.ttft_relative, 0.07, 1e-12);
  EXPECT_FALSE(b.lower_bound_only);
  EXPECT_NE(b.basis.find("fitted 50 %"), std::string::npos) << b.basis;
}

TEST(PredictionBand, FractionsAreNormalised) {
  PredictionBand b = prediction_band(shares({{CostSource::Fitted, 2}, {CostSource::Measured, 2}}), 0.08);
  EXPECT_NEAR(b.fitted_share, 0.5, 1e-12);
  EXPECT_NEAR(b.step_relative, 0.05 + 0.04, 1e-12);
}

TEST(PredictionBand, RooflineBeyondTheCoveredShareIsALowerBound) {
  // Llama-3.1-8B on its own measured profile carries ~11 % derived (elementwise on measured HBM): a band.
  PredictionBand ok = prediction_band(shares({{CostSource::Measured, 0.89}, {CostSource::Derived, 0.11}}), -1);
  EXPECT_FALSE(ok.lower_bound_only);
  EXPECT_DOUBLE_EQ(ok.step_relative, 0.05);
  // Past 20 % roofline (derived + nominal together): a floor only, no band figure.
  PredictionBand lb = prediction_band(
      shares({{CostSource::Measured, 0.7}, {CostSource::Derived, 0.15}, {CostSource::Nominal, 0.15}}), 0.05);
  EXPECT_TRUE(lb.lower_bound_only);
  EXPECT_EQ(lb.step_relative, 0);
  EXPECT_NEAR(lb.roofline_share, 0.30, 1e-12);
  EXPECT_NE(lb.basis.find("lower bound only"), std::string::npos) << lb.basis;
  // Any roofline share beyond the covered one: a rule with nothing covered flags the smallest share.
  BandRule strict;
  strict.roofline_covered = 0;
  EXPECT_TRUE(prediction_band(shares({{CostSource::Measured, 0.99}, {CostSource::Nominal, 0.01}}), -1, strict)
                  .lower_bound_only);
  // A hypothetical machine (all nominal).
  EXPECT_TRUE(prediction_band(shares({{CostSource::Nominal, 1}}), -1).lower_bound_only);
}

TEST(PredictionBand, FittedWithoutAKnownBandCountsAsRoofline) {
  PredictionBand b = prediction_band(shares({{CostSource::Fitted, 0.3}, {CostSource::Measured, 0.7}}), -1);
  EXPECT_TRUE(b.lower_bound_only);
  EXPECT_NEAR(b.roofline_share, 0.3, 1e-12);
}

TEST(PredictionBand, NothingPricedClaimsNothing) {
  PredictionBand b = prediction_band(shares({}), 0.1);
  EXPECT_FALSE(b.known);
  EXPECT_TRUE(band_to_json(b).is_null());
  EXPECT_EQ(with_band("5.00", 0.05, b), "5.00");
  EXPECT_FALSE(prediction_band(nlohmann::json::object()).known);
}

TEST(PredictionBand, FromProvenanceUsesTheLargerFittedBand) {
  nlohmann::json prov = {
      {"cost_sources",
       {{"measured", {{"ops", 10}, {"time_fraction", 0.12}}},
        {"fitted", {{"ops", 50}, {"time_fraction", 0.80}}},
        {"derived", {{"ops", 5}, {"time_fraction", 0.08}}}}},
      {"fitted_fallback", {{"band_gemm", 0.051}, {"band_attention", 0.084}}}};
  PredictionBand b = prediction_band(prov);
  ASSERT_TRUE(b.known);
  EXPECT_NEAR(b.fitted_band, 0.084, 1e-12);
  EXPECT_NEAR(b.step_relative, 0.05 + 0.80 * 0.084, 1e-12);
  EXPECT_NEAR(b.ttft_relative, 0.10 + 0.80 * 0.084, 1e-12);
  nlohmann::json j = band_to_json(b);
  EXPECT_NEAR(j["relative"].get<double>(), 0.05 + 0.80 * 0.084, 1e-12);
  EXPECT_FALSE(j["lower_bound_only"].get<bool>());
  EXPECT_EQ(with_band("14.66", b.step_relative, b), "14.66 ±12%");
  b.lower_bound_only = true;
  EXPECT_TRUE(band_to_json(b)["relative"].is_null());
  EXPECT_EQ(with_band("14.66", 0, b), ">=14.66");
}

}  // namespace
}  // namespace peerplan
