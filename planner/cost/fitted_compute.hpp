#pragma once
// The `fitted` fallback: prices a GEMM or attention shape the profile did not time from the
// efficiency (roofline time / measured time) of the shapes it did time on the same machine.
// A bare roofline is 2-5x optimistic for shapes far from peak; the measured efficiency of
// neighbouring shapes says how far from peak this GPU really runs them.
//
//  GEMM: for each measured (n,k), log efficiency is interpolated linearly in log m (clamped at
//  the measured range); the target's efficiency is the inverse-distance-weighted (1/d^2) mean
//  over the 3 measured (n,k) nearest in d = |log(n*k / n'k')| + 0.5 |log(k / k')|.
//  Decode attention: the 3 measured entries nearest in d = sum of |log| differences of batch,
//  context, q_len, kv_heads, head_dim and 0.25 x those of q-heads per kv-head, weighted 1/d^2.
//  Prefill attention: the 2 nearest in |log| of batch*heads*q_len, head_dim and 0.5 x context.
// The choices (3 neighbours, the weights) are what leave-one-model-out on the shipped 2xH200
// profile said was most accurate (tests/cost/leave_one_model_out_test.cpp).
#include <cstdint>
#include <map>
#include <optional>
#include <utility>
#include <vector>

#include "planner/compile/op_graph.hpp"
#include "planner/topology/measurements.hpp"

namespace peerplan {

class FittedCompute {
 public:
  // peak_flops / hbm_Bps: the normaliser (any consistent roofline works; the GPU's own figures
  // keep the efficiencies readable). Either may be 0 when unknown: that side is left out.
  FittedCompute(const Measurements& meas, double peak_flops, double hbm_Bps);

  bool has_gemm() const { return !gemm_.empty(); }
  bool has_attention() const { return !attn_.empty(); }
  size_t gemm_shape_count() const { return gemm_.size(); }
  size_t attention_point_count() const { return attn_.size(); }
  // nullopt when the profile has no point to fit from (or the shape is degenerate).
  std::optional<double> gemm_s(int64_t m, int64_t n, int64_t k) const;
  std::optional<double> attention_s(const Op& op) const;

  // The fit's own error band, computed when the profile is loaded: each measured GEMM (n,k) /
  // attention (heads, kv heads, head_dim) left out in turn and its points priced from the rest;
  // the mean |relative error| over those points (0 when there is nothing to leave out).
  double gemm_band() const { return gemm_band_; }
  double attention_band() const { return attn_band_; }

  // The roofline the efficiencies are relative to (exposed for tests).
  double gemm_roofline_s(int64_t m, int64_t n, int64_t k) const;
  double attention_roofline_s(bool prefill, int64_t batch, int64_t q_len, int64_t context, int64_t heads,
                              int64_t kv_heads, int64_t head_dim) const;

 private:
  static void features(bool prefill, int64_t batch, int64_t q_len, int64_t context, int64_t heads, int64_t kv_heads,
                       int64_t head_dim, double f[6]);
  struct AttnPoint {
    bool prefill = false;
    double f[6] = {};  // features() of the entry
    double log_eff = 0;
    int64_t group = 0;  // heads * 1e6 + kv_heads * 1e3 + head_dim: what leave-one-out removes
    double measured_s = 0, roofline_s = 0;
  };
  double gemm_eff(double lm, double lnk, double lk, const std::pair<int64_t, int64_t>* skip) const;
  std::optional<double> attn_log_eff(bool prefill, const double f[6], int64_t skip_group) const;
  double gemm_band_ = 0, attn_band_ = 0;
  double peak_flops_, hbm_Bps_;
  std::map<std::pair<int64_t, int64_t>, std::vector<std::pair<double, double>>> gemm_;  // (n,k) -> (log m, log eff)
  std::vector<AttnPoint> attn_;
};

}  // namespace peerplan
