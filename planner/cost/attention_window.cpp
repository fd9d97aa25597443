#include "planner/cost/attention_window.hpp"

#include <algorithm>
#include <cmath>

#include "planner/model/model_config.hpp"

namespace peerplan {

AttentionShape window_priced_shape(const AttentionShape& s, int64_t window, double* work_factor) {
  *work_factor = 1.0;
  if (window <= 0 || s.context <= window) return s;  // the window does not bind: full (causal) attention
  AttentionShape e = s;
  if (!s.prefill) {
    e.context = window;  // the last `window` tokens, whatever the context
    return e;
  }
  const int64_t q = std::max<int64_t>(s.q_len, 1);
  const double band = attended_pairs(q, s.context, window);  // per sequence
  const double c_eq = band / double(q) + double(q - 1) / 2.0;
  e.context = std::clamp<int64_t>(std::llround(c_eq), q, s.context);
  const double w = attention_work(e);
  if (w > 0) *work_factor = double(std::max<int64_t>(s.batch, 1)) * band / w;
  return e;
}

std::optional<ComputePrice> attention_from_grid_windowed(const std::vector<AttentionTime>& table, int gpu,
                                                         const AttentionShape& s, int64_t window) {
  double factor = 1.0;
  const AttentionShape e = window_priced_shape(s, window, &factor);
  std::optional<ComputePrice> p = attention_from_grid(table, gpu, e);
  if (p) p->seconds *= factor;
  return p;
}

std::optional<double> fitted_attention_windowed_s(const FittedCompute& f, const Op& op) {
  if (op.attn_window <= 0) return f.attention_s(op);
  AttentionShape s;
  s.prefill = op.attn_prefill;
  s.batch = op.attn_batch, s.q_len = op.attn_q_len, s.context = op.attn_context;
  s.heads = op.attn_heads, s.kv_heads = op.attn_kv_heads, s.head_dim = op.attn_head_dim;
  double factor = 1.0;
  Op eq = op;
  eq.attn_context = window_priced_shape(s, op.attn_window, &factor).context;
  std::optional<double> t = f.attention_s(eq);
  if (t) *t *= factor;
  return t;
}

}  // namespace peerplan
