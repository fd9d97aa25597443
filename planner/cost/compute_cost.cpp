#include "planner/cost/compute_cost.hpp"

#include "planner/cost/attention_grid.hpp"
#include "planner/cost/attention_window.hpp"
#include "planner/cost/quant_cost.hpp"

#include <algorithm>
#include <limits>

namespace peerplan {

double roofline_s(double flops, double bytes, double flops_per_s, double bytes_per_s) {
  double t = 0;
  if (flops > 0 && flops_per_s > 0) t = std::max(t, flops / flops_per_s);
  if (bytes > 0 && bytes_per_s > 0) t = std::max(t, bytes / bytes_per_s);
  return t;
}

ComputePrice from_points(std::vector<std::pair<double, double>> pts, double x) {
  std::sort(pts.begin(), pts.end());
  auto it = std::lower_bound(pts.begin(), pts.end(), x, [](const auto& p, double v) { return p.first < v; });
  if (it != pts.end() && it->first == x) return {it->second, CostSource::Measured};
  if (it == pts.end()) return {pts.back().second * x / pts.back().first, CostSource::Extrapolated};
  if (it == pts.begin()) return {pts.front().second, CostSource::Extrapolated};
  const auto& a = *(it - 1);
  const auto& b = *it;
  double f = (x - a.first) / (b.first - a.first);
  return {a.second + f * (b.second - a.second), CostSource::Interpolated};
}

std::optional<ComputePrice> gemm_from_table(const std::vector<GemmTime>& table, int gpu, int64_t m, int64_t n,
                                            int64_t k, const std::string& dtype, int64_t batch) {
  for (int pass = 0; pass < 2; ++pass) {
    std::vector<std::pair<double, double>> pts;
    for (const GemmTime& g : table)
      if (g.n == n && g.k == k && g.m > 0 && g.dtype == dtype && g.batch == batch && (pass == 1 || g.gpu == gpu))
        pts.push_back({double(g.m), g.time.median});
    if (!pts.empty()) return from_points(std::move(pts), double(std::max<int64_t>(m, 1)));
  }
  return std::nullopt;
}

std::optional<ComputePrice> attention_from_table(const std::vector<AttentionTime>& table, int gpu, const Op& op,
                                                 int sms) {
  // The measured 2-D grid, interpolated in log space (planner/cost/attention_grid.hpp, issue 18).
  AttentionShape s;
  s.prefill = op.attn_prefill;
  s.batch = op.attn_batch, s.q_len = op.attn_q_len, s.context = op.attn_context;
  s.heads = op.attn_heads, s.kv_heads = op.attn_kv_heads, s.head_dim = op.attn_head_dim;
  s.kv_dtype = attention_table_dtype(op.kv_dtype);
  s.v_dim = op.attn_v_dim;  // MLA's 576/512 decode and 192/128 prefill: rows of that v_dim only
  s.sms = sms;              // > 0: prefill between grid points by the wave model
  // A sliding-window layer (issue 18) at its band's work: planner/cost/attention_window.hpp.
  if (op.attn_window > 0) return attention_from_grid_windowed(table, gpu, s, op.attn_window);
  return attention_from_grid(table, gpu, s);
}

}  // namespace peerplan
