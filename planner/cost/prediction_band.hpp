#pragma once
// The error band of a prediction (issue 23 item 3), from how its step time was priced: the share of
// simulated op time per CostSource (metrics provenance "cost_sources") and the fitted fallback's own
// leave-one-model-out error ("fitted_fallback"). The one definition; docs/simulator.md, "Error band".
//
//   measured share  m = measured + interpolated + extrapolated (points of this machine's tables)
//   fitted share    f = fitted (fitted_compute.hpp, or a bf16 price scaled to a quantized format)
//   roofline share  r = derived + nominal (measured-HBM or datasheet rooflines, ring estimates,
//                       nominal link rates: each a floor on the time, never a ceiling)
//
//   band = measured bound + f x fitted band     (triangle inequality: the measured bound is what
//                                                the validated runs show for a step priced from
//                                                measured points; a fitted op adds at most its own
//                                                leave-one-out error, weighted by its share)
//   lower_bound_only when r > roofline_covered (validated plans carried up to 16 % roofline time,
//                    their elementwise ops on the measured HBM bandwidth, so that much is inside
//                    the measured bound; beyond it the figure is a floor, not a band)
#include <array>
#include <string>

#include <nlohmann/json.hpp>

#include "planner/cost/cost_source.hpp"

namespace peerplan {

struct BandRule {
  // Validated error of measured-point predictions (docs/validation/README.md, HISTORY.md): TPOT p50
  // within 5 % in every single-GPU Llama-3.1-8B run since the graph-gap fix (+0.5 to +2.5 %) and in
  // the new-models runs priced from their own shapes (Qwen2-7B +3.6 %, Phi-3-mini -0.6 %); TTFT p50
  // moves up to ~10 % between leases (issue 23 item 5: +8.6 to +10.4 %; 70B FP8 -10.4 %).
  double measured_step = 0.05;     // TPOT and the other step-time figures
  double measured_ttft = 0.10;     // TTFT
  double roofline_covered = 0.20;  // roofline share the validated plans carried (11-16 %), rounded up
};

struct PredictionBand {
  double step_relative = 0;  // TPOT: +- this fraction (0 when lower_bound_only)
  double ttft_relative = 0;  // TTFT
  bool lower_bound_only = false;
  bool known = false;        // false: no cost_sources to derive it from (nothing is claimed)
  double measured_share = 0, fitted_share = 0, roofline_share = 0;
  double fitted_band = 0;    // the leave-one-model-out error used for the fitted share
  std::string basis;         // one line: the shares and bounds it came from
};

// time_fraction[k]: share of simulated op time priced from CostSource(k) (normalised here);
// fitted_band: the leave-one-model-out error of the fitted fallback, or a negative value when
// unknown (then the fitted share is counted with the roofline share: nothing bounds it).
PredictionBand prediction_band(const std::array<double, kCostSourceCount>& time_fraction, double fitted_band,
                               const BandRule& rule = {});
// From a metrics provenance: "cost_sources".<source>.time_fraction and "fitted_fallback"
// (band_gemm, band_attention: the larger, as the shares do not split GEMM from attention).
PredictionBand prediction_band(const nlohmann::json& provenance, const BandRule& rule = {});

// {"relative": step band or null, "ttft_relative": ..., "lower_bound_only", "basis", "shares": {...}};
// null when the band is not known.
nlohmann::json band_to_json(const PredictionBand& b);
// A figure with its band for tables: "5.24 ±5%", ">=5.24" (lower bound), "5.24" (unknown).
std::string with_band(const std::string& figure, double relative, const PredictionBand& b);

}  // namespace peerplan
