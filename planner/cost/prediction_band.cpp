#include "planner/cost/prediction_band.hpp"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

namespace peerplan {

namespace {
double at(const std::array<double, kCostSourceCount>& f, CostSource s) {
  const double v = f[size_t(s)];
  return std::isfinite(v) && v > 0 ? v : 0.0;
}
}  // namespace

PredictionBand prediction_band(const std::array<double, kCostSourceCount>& time_fraction, double fitted_band,
                               const BandRule& rule) {
  PredictionBand b;
  double total = 0;
  for (int k = 0; k < kCostSourceCount; ++k) total += at(time_fraction, CostSource(k));
  if (!(total > 0)) return b;  // nothing priced: no claim
  b.known = true;
  b.measured_share = (at(time_fraction, CostSource::Measured) + at(time_fraction, CostSource::Interpolated) +
                      at(time_fraction, CostSource::Extrapolated)) / total;
  b.fitted_share = at(time_fraction, CostSource::Fitted) / total;
  b.roofline_share = (at(time_fraction, CostSource::Derived) + at(time_fraction, CostSource::Nominal)) / total;
  const bool fitted_known = std::isfinite(fitted_band) && fitted_band >= 0;
  if (!fitted_known && b.fitted_share > 0) {  // a fit whose own error is unknown bounds nothing
    b.roofline_share += b.fitted_share;
    b.fitted_share = 0;
  }
  b.fitted_band = fitted_known ? fitted_band : 0;
  b.lower_bound_only = b.roofline_share > rule.roofline_covered;
  if (!b.lower_bound_only) {
    b.step_relative = rule.measured_step + b.fitted_share * b.fitted_band;
    b.ttft_relative = rule.measured_ttft + b.fitted_share * b.fitted_band;
  }
  b.basis = fmt::format("measured {:.0f} % (validated ±{:.0f} % TPOT, ±{:.0f} % TTFT)", 100 * b.measured_share,
                        100 * rule.measured_step, 100 * rule.measured_ttft);
  if (b.fitted_share > 0)
    b.basis += fmt::format(" + fitted {:.0f} % (leave-one-model-out ±{:.1f} %)", 100 * b.fitted_share, 100 * b.fitted_band);
  if (b.roofline_share > 0)
    b.basis += b.lower_bound_only
                   ? fmt::format("; roofline {:.0f} % (over {:.0f} %): a lower bound only", 100 * b.roofline_share,
                                 100 * rule.roofline_covered)
                   : fmt::format("; roofline {:.0f} % (within the {:.0f} % the validated plans carried)",
                                 100 * b.roofline_share, 100 * rule.roofline_covered);
  return b;
}

PredictionBand prediction_band(const nlohmann::json& prov, const BandRule& rule) {
  std::array<double, kCostSourceCount> f{};
  if (!prov.is_object() || !prov.contains("cost_sources") || !prov["cost_sources"].is_object()) return {};
  const nlohmann::json& cs = prov["cost_sources"];
  for (int k = 0; k < kCostSourceCount; ++k) {
    const char* name = to_string(CostSource(k));
    if (cs.contains(name) && cs[name].is_object() && cs[name].contains("time_fraction") &&
        cs[name]["time_fraction"].is_number())
      f[size_t(k)] = cs[name]["time_fraction"].get<double>();
  }
  double fitted_band = -1;
  if (prov.contains("fitted_fallback") && prov["fitted_fallback"].is_object()) {
    const nlohmann::json& ff = prov["fitted_fallback"];
    auto num = [&](const char* k) { return ff.contains(k) && ff[k].is_number() ? ff[k].get<double>() : -1.0; };
    fitted_band = std::max(num("band_gemm"), num("band_attention"));
  }
  return prediction_band(f, fitted_band, rule);
}

nlohmann::json band_to_json(const PredictionBand& b) {
  if (!b.known) return nullptr;
  auto rel = [&](double v) { return b.lower_bound_only ? nlohmann::json() : nlohmann::json(v); };
  return {{"relative", rel(b.step_relative)},
          {"ttft_relative", rel(b.ttft_relative)},
          {"lower_bound_only", b.lower_bound_only},
          {"basis", b.basis},
          {"shares", {{"measured", b.measured_share}, {"fitted", b.fitted_share}, {"roofline", b.roofline_share}}},
          {"fitted_band", b.fitted_band}};
}

std::string with_band(const std::string& figure, double relative, const PredictionBand& b) {
  if (!b.known) return figure;
  if (b.lower_bound_only) return ">=" + figure;
  return fmt::format("{} ±{:.0f}%", figure, 100 * relative);
}

}  // namespace peerplan
