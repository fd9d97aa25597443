#include "planner/cost/fitted_compute.hpp"

#include <algorithm>
#include <cmath>

#include "planner/cost/compute_cost.hpp"

namespace peerplan {

namespace {

constexpr int kNeighbours = 3;
constexpr double kKWeight = 0.5;      // GEMM: k (the reduction length) beyond its share of n*k
constexpr double kRatioWeight = 0.25; // decode attention: q-heads per kv-head matters little (KV-bound)

double lg(double v) { return std::log(std::max(v, 1.0)); }

// Log efficiency of one measured (n,k) at log m: linear between measured m, clamped outside.
double log_eff_at(const std::vector<std::pair<double, double>>& pts, double lm) {
  if (lm <= pts.front().first) return pts.front().second;
  if (lm >= pts.back().first) return pts.back().second;
  auto it = std::lower_bound(pts.begin(), pts.end(), lm, [](const auto& p, double v) { return p.first < v; });
  const auto& a = *(it - 1);
  const auto& b = *it;
  double f = (lm - a.first) / (b.first - a.first);
  return a.second + f * (b.second - a.second);
}

// Inverse-distance (1/d^2) mean of the `nb` nearest values; an exact match wins.
double idw(std::vector<std::pair<double, double>> dv, int nb = kNeighbours) {
  size_t n = std::min<size_t>(size_t(nb), dv.size());
  std::partial_sort(dv.begin(), dv.begin() + long(n), dv.end());
  double sw = 0, s = 0;
  for (size_t i = 0; i < n; ++i) {
    double w = 1.0 / ((dv[i].first + 1e-3) * (dv[i].first + 1e-3));
    sw += w;
    s += w * dv[i].second;
  }
  return s / sw;
}

// Attention features (log scale) and their weights. Decode is KV-read bound: batch, context and
// kv heads decide it. Prefill is compute bound: its efficiency follows the parallel work
// (batch * q-heads * q_len), so a 64-head model at 512 tokens resembles a 32-head one at 1024.
constexpr double kDecodeW[6] = {1, 1, 1, 1, 1, kRatioWeight};
constexpr double kPrefillW[6] = {1, 0.5, 1, 0, 0, 0};

}  // namespace

void FittedCompute::features(bool prefill, int64_t batch, int64_t q_len, int64_t context, int64_t heads,
                             int64_t kv_heads, int64_t head_dim, double f[6]) {
  const double b = double(batch), q = double(std::max<int64_t>(q_len, 1)), h = double(heads);
  if (prefill) {
    const double v[6] = {lg(b * h * q), lg(double(context)), lg(double(head_dim)), 0, 0, 0};
    std::copy(v, v + 6, f);
  } else {
    const double v[6] = {lg(b), lg(double(context)), lg(q), lg(double(kv_heads)), lg(double(head_dim)),
                         lg(h / double(kv_heads))};
    std::copy(v, v + 6, f);
  }
}

FittedCompute::FittedCompute(const Measurements& meas, double peak_flops, double hbm_Bps)
    : peak_flops_(peak_flops), hbm_Bps_(hbm_Bps) {
  // The fit is of bf16 kernels: quantized rows (issue 15) have other rooflines and are priced
  // from their own rows, or from this fit scaled by their roofline (cost_model.cpp).
  for (const GemmTime& g : meas.gemms) {
    // Batched rows time several products per call: not points of the one-GEMM curve.
    if (g.dtype != "bf16" || g.batch != 1 || g.m <= 0 || g.n <= 0 || g.k <= 0 || !(g.time.median > 0)) continue;
    double r = gemm_roofline_s(g.m, g.n, g.k);
    if (!(r > 0)) continue;
    gemm_[{g.n, g.k}].push_back({lg(double(g.m)), std::log(r / g.time.median)});
  }
  for (auto& [nk, pts] : gemm_) {
    std::sort(pts.begin(), pts.end());
    // Several GPUs may have timed the same m: keep their mean (adjacent after sorting).
    std::vector<std::pair<double, double>> merged;
    for (size_t i = 0; i < pts.size();) {
      size_t j = i;
      double s = 0;
      while (j < pts.size() && pts[j].first == pts[i].first) s += pts[j++].second;
      merged.push_back({pts[i].first, s / double(j - i)});
      i = j;
    }
    pts = std::move(merged);
  }
  for (const AttentionTime& a : meas.attention) {
    if (a.kv_dtype != "bf16" || a.batch <= 0 || a.context <= 0 || a.heads <= 0 || a.kv_heads <= 0 || a.head_dim <= 0 || !(a.time.median > 0))
      continue;
    // MLA rows (another v_dim, another kernel) would teach the standard-attention fit a roofline
    // that assumes V as wide as K: left out.
    if (attention_v_dim(a.v_dim, a.head_dim) != a.head_dim) continue;
    bool prefill = a.phase == "prefill";
    double r = attention_roofline_s(prefill, a.batch, a.q_len, a.context, a.heads, a.kv_heads, a.head_dim);
    if (!(r > 0)) continue;
    AttnPoint p;
    p.prefill = prefill;
    features(prefill, a.batch, a.q_len, a.context, a.heads, a.kv_heads, a.head_dim, p.f);
    p.log_eff = std::log(r / a.time.median);
    p.group = a.heads * 1000000 + a.kv_heads * 1000 + a.head_dim;
    p.measured_s = a.time.median;
    p.roofline_s = r;
    attn_.push_back(p);
  }
  // Leave-one-shape-out band (see gemm_band()).
  double se = 0;
  int ne = 0;
  if (gemm_.size() > 1)
    for (const auto& [nk, pts] : gemm_)
      for (const auto& [lm, le] : pts) {
        double pe = gemm_eff(lm, lg(double(nk.first)) + lg(double(nk.second)), lg(double(nk.second)), &nk);
        se += std::abs(std::exp(le - pe) - 1);  // predicted / measured - 1
        ++ne;
      }
  gemm_band_ = ne ? se / ne : 0;
  se = 0;
  ne = 0;
  for (const AttnPoint& p : attn_)
    if (std::optional<double> pe = attn_log_eff(p.prefill, p.f, p.group)) {
      se += std::abs(std::exp(p.log_eff - *pe) - 1);
      ++ne;
    }
  attn_band_ = ne ? se / ne : 0;
}

double FittedCompute::gemm_roofline_s(int64_t m, int64_t n, int64_t k) const {
  double M = double(m), N = double(n), K = double(k);
  return roofline_s(2 * M * N * K, 2 * (M * K + K * N + M * N), peak_flops_, hbm_Bps_);
}

double FittedCompute::attention_roofline_s(bool prefill, int64_t batch, int64_t q_len, int64_t context,
                                           int64_t heads, int64_t kv_heads, int64_t head_dim) const {
  double b = double(batch), q = double(std::max<int64_t>(q_len, 1)), c = double(context), h = double(heads);
  double kv = double(kv_heads), d = double(head_dim);
  // Keys each query sees: all of them in decode; causal in prefill (the chunk's own tokens half).
  double keys = prefill ? std::max(1.0, c - (q - 1) / 2) : c;
  double flops = 4 * b * h * q * keys * d;
  double bytes = 2 * (2 * b * c * kv * d) + 2 * (2 * b * q * h * d);  // bf16 K and V, Q and O
  return roofline_s(flops, bytes, peak_flops_, hbm_Bps_);
}

double FittedCompute::gemm_eff(double lm, double lnk, double lk, const std::pair<int64_t, int64_t>* skip) const {
  std::vector<std::pair<double, double>> dv;
  for (const auto& [nk, pts] : gemm_) {
    if (skip && nk == *skip) continue;
    double d = std::abs(lnk - lg(double(nk.first)) - lg(double(nk.second))) + kKWeight * std::abs(lk - lg(double(nk.second)));
    dv.push_back({d, log_eff_at(pts, lm)});
  }
  return idw(std::move(dv));
}

std::optional<double> FittedCompute::gemm_s(int64_t m, int64_t n, int64_t k) const {
  if (gemm_.empty() || n <= 0 || k <= 0) return std::nullopt;
  m = std::max<int64_t>(m, 1);
  double r = gemm_roofline_s(m, n, k);
  if (!(r > 0)) return std::nullopt;
  return r / std::exp(gemm_eff(lg(double(m)), lg(double(n)) + lg(double(k)), lg(double(k)), nullptr));
}

std::optional<double> FittedCompute::attn_log_eff(bool prefill, const double f[6], int64_t skip_group) const {
  const double* w = prefill ? kPrefillW : kDecodeW;
  std::vector<std::pair<double, double>> dv;
  for (const AttnPoint& p : attn_) {
    if (p.prefill != prefill || p.group == skip_group) continue;
    double d = 0;
    for (int i = 0; i < 6; ++i) d += w[i] * std::abs(f[i] - p.f[i]);
    dv.push_back({d, p.log_eff});
  }
  if (dv.empty()) return std::nullopt;
  return idw(std::move(dv), prefill ? 2 : kNeighbours);
}

std::optional<double> FittedCompute::attention_s(const Op& op) const {
  if (op.attn_batch <= 0 || op.attn_context <= 0 || op.attn_heads <= 0 || op.attn_kv_heads <= 0 ||
      op.attn_head_dim <= 0)
    return std::nullopt;
  double f[6];
  features(op.attn_prefill, op.attn_batch, op.attn_q_len, op.attn_context, op.attn_heads, op.attn_kv_heads,
           op.attn_head_dim, f);
  double r = attention_roofline_s(op.attn_prefill, op.attn_batch, op.attn_q_len, op.attn_context, op.attn_heads,
                                  op.attn_kv_heads, op.attn_head_dim);
  std::optional<double> le = attn_log_eff(op.attn_prefill, f, -1);
  if (!le || !(r > 0)) return std::nullopt;
  return r / std::exp(*le);
}

}  // namespace peerplan
