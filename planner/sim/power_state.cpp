#include "planner/sim/power_state.hpp"

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>

#include "planner/compile/graph_batch.hpp"
#include "planner/core/dtype.hpp"
#include "planner/model/expert_format.hpp"

namespace peerplan {

bool draws_power_cap(const BatchShape& s) { return s.prefill_tokens > 0 && s.tokens() > kGraphTimedMaxRows; }

namespace {

// Each class's factor at attention share `share`, linear between the mixes and held at the ends.
ThrottleMix mix_at(const std::vector<ThrottleMix>& m, double share) {
  ThrottleMix f = m.front();
  if (share >= m.back().attention_share) {
    f = m.back();
  } else if (share > m.front().attention_share) {
    size_t i = 1;
    while (m[i].attention_share < share) ++i;
    const ThrottleMix &a = m[i - 1], &b = m[i];
    const double t = (share - a.attention_share) / (b.attention_share - a.attention_share);
    f.gemm = a.gemm + t * (b.gemm - a.gemm);
    f.attention = a.attention + t * (b.attention - a.attention);
    f.elementwise = a.elementwise + t * (b.elementwise - a.elementwise);
  }
  return f;
}

}  // namespace

bool throttle_fits_experts(const GroupedThrottle& t, const ModelConfig& cfg) {
  return t.hidden == cfg.hidden && t.intermediate == cfg.expert_intermediate && t.experts == cfg.experts &&
         t.topk == cfg.experts_per_token;
}

std::vector<GroupedThrottle> grouped_throttles_for(const PowerThrottle& p, const ModelConfig& cfg) {
  std::vector<GroupedThrottle> g;
  if (!cfg.is_moe()) return g;
  // The tables of the experts' own format; a profile without them (every one before session 30 timed
  // bf16 alone) gives its bf16 tables, as before.
  const std::optional<DType> f = routed_expert_format(cfg);
  const std::string want = f ? dtype_name(*f) : "bf16";
  for (const std::string& dtype : {want, std::string("bf16")}) {
    for (const GroupedThrottle& t : p.grouped)
      if (throttle_fits_experts(t, cfg) && !t.mixes.empty() && t.tokens > 0 && t.dtype == dtype)
        g.push_back(t);
    if (!g.empty()) break;
  }
  std::stable_sort(g.begin(), g.end(), [](const GroupedThrottle& a, const GroupedThrottle& b) { return a.tokens < b.tokens; });
  return g;
}

const std::vector<ThrottleMix>* nearest_grouped_mixes(const std::vector<GroupedThrottle>& g, int64_t tokens) {
  const GroupedThrottle* best = nullptr;
  double best_d = 0;
  for (const GroupedThrottle& t : g) {
    const double d = tokens > 0 ? std::abs(std::log(double(t.tokens) / double(tokens))) : 0.0;
    if (!best || d < best_d - 1e-12) best = &t, best_d = d;
  }
  return best ? &best->mixes : nullptr;
}

double throttle_factor(const PowerThrottle& p, const ClassSeconds& c, const std::vector<ThrottleMix>* grouped) {
  const std::vector<ThrottleMix>& m = p.mixes;
  const double gemms = c.gemm + c.grouped;
  const double total = gemms + c.attention + c.elementwise;
  if (m.empty() || total <= 0) return p.factor;
  const double share = gemms + c.attention > 0 ? c.attention / (gemms + c.attention) : 0.0;
  auto weighted = [&](const ThrottleMix& f) {
    return (gemms * f.gemm + c.attention * f.attention + c.elementwise * f.elementwise) / total;
  };
  const double dense = weighted(mix_at(m, share));
  if (!grouped || grouped->empty() || c.grouped <= 0) return dense;
  const double wg = c.grouped / gemms;
  return (1 - wg) * dense + wg * weighted(mix_at(*grouped, share));
}

double PowerState::run(double start, double priced_s, bool heavy, double factor) {
  budget_ = std::min(p_.onset_s, budget_ + std::max(0.0, start - last_end_));  // idle: one second per second
  double d = priced_s;
  if (heavy) {
    d += std::max(0.0, priced_s - budget_) * (factor - 1.0);
    budget_ = std::max(0.0, budget_ - priced_s);
  } else {
    budget_ = std::min(p_.onset_s, budget_ + priced_s * kLightRefill);
  }
  last_end_ = start + d;
  return d;
}

}  // namespace peerplan
