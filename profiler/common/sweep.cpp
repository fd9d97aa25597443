#include "profiler/common/sweep.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>

#include <fmt/format.h>

#include "planner/compile/graph_batch.hpp"
#include "planner/core/error.hpp"
#include "planner/model/routing_model.hpp"

namespace peerplan::profiler {

std::vector<int64_t> log_sizes(int64_t min_bytes, int64_t max_bytes, double factor) {
  if (min_bytes < 4) throw InputError("", "--min-size", "a size of at least 4 bytes");
  if (max_bytes < min_bytes)
    throw InputError("", "--max-size", fmt::format("a size >= --min-size ({} bytes), got {}", min_bytes, max_bytes));
  if (!(factor > 1.0)) throw InputError("", "sweep factor", "a factor > 1");
  std::vector<int64_t> out;
  for (double s = double(min_bytes); s < double(max_bytes) * (1 - 1e-9); s *= factor) {
    int64_t v = std::max<int64_t>(4, (int64_t(std::llround(s)) / 4) * 4);
    if (out.empty() || v > out.back()) out.push_back(v);
  }
  int64_t last = std::max<int64_t>(4, (max_bytes / 4) * 4);
  if (out.empty() || last > out.back()) out.push_back(last);
  return out;
}

int64_t parse_size(const std::string& text, const std::string& option) {
  const std::string expected = "a size such as 4096, 4K, 64MiB or 1G (binary units); got '" + text + "'";
  size_t i = 0;
  while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) ++i;
  if (i == 0) throw InputError("", option, expected);
  int64_t mult = 1;
  std::string unit = text.substr(i);
  for (auto& c : unit) c = char(std::toupper(static_cast<unsigned char>(c)));
  if (unit.empty() || unit == "B") mult = 1;
  else if (unit == "K" || unit == "KB" || unit == "KIB") mult = int64_t(1) << 10;
  else if (unit == "M" || unit == "MB" || unit == "MIB") mult = int64_t(1) << 20;
  else if (unit == "G" || unit == "GB" || unit == "GIB") mult = int64_t(1) << 30;
  else throw InputError("", option, expected);
  if (i > 12) throw InputError("", option, expected);
  int64_t v = std::stoll(text.substr(0, i)) * mult;
  if (v <= 0) throw InputError("", option, expected);
  return v;
}

std::string format_size(int64_t b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  double v = double(b);
  while (v >= 1024 && u < 4 && std::fmod(v, 1024) == 0) { v /= 1024; ++u; }
  if (u == 0 && b >= 1024) {  // not an exact multiple: one decimal
    while (v >= 1024 && u < 4) { v /= 1024; ++u; }
    return fmt::format("{:.1f} {}", v, units[u]);
  }
  return fmt::format("{:g} {}", v, units[u]);
}

std::vector<int64_t> token_counts(int64_t max_tokens) {
  if (max_tokens < 1) throw InputError("", "--max-tokens", "a token count >= 1");
  std::vector<int64_t> out;
  for (int64_t t = 1; t <= max_tokens; t *= 2) out.push_back(t);
  if (out.back() != max_tokens) out.push_back(max_tokens);
  return out;
}

std::vector<int64_t> grouped_token_counts(const std::vector<int64_t>& tokens) {
  std::vector<int64_t> out = tokens;
  for (int64_t t : tokens)
    if (t >= kGraphTimedMaxRows && std::find(tokens.begin(), tokens.end(), 2 * t) != tokens.end()) out.push_back(t + t / 2);
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

std::vector<int64_t> expert_gemm_rows(const std::vector<int64_t>& tokens, int64_t topk, int64_t experts) {
  if (topk < 1 || experts < topk)
    throw InputError("", "expert_gemm_rows", fmt::format("1 <= top-k <= experts, got top-k {} of {}", topk, experts));
  const routing::RoutingSpec spec;  // what the grouped sweep and the compiler count by default
  int64_t hi = 0;
  for (int64_t t : tokens) {
    if (t <= kGraphTimedMaxRows) continue;
    int64_t busiest = 0;
    for (int layer = 0; layer < kExpertRowsLayers; ++layer)
      busiest = std::max(busiest, routing::group_load(routing::expert_counts(spec, experts, topk, t, layer), 0, experts).max_rows);
    const int64_t up = (busiest + kExpertRowsStep - 1) / kExpertRowsStep * kExpertRowsStep;
    hi = std::max(hi, std::min(up, t));
  }
  std::vector<int64_t> out;
  if (hi <= 0) return out;
  for (int64_t r = kExpertRowsStep; r < hi; r += kExpertRowsStep) out.push_back(r);
  out.push_back(hi);
  return out;
}

std::vector<int64_t> refine_expert_rows(const std::vector<std::pair<int64_t, double>>& timed, int64_t fine,
                                        size_t max_steps) {
  std::vector<int64_t> out;
  if (timed.size() < 3 || fine < 1) return out;
  std::vector<double> d;
  for (size_t i = 1; i < timed.size(); ++i) d.push_back(timed[i].second - timed[i - 1].second);
  std::vector<double> sorted = d;
  std::nth_element(sorted.begin(), sorted.begin() + long(sorted.size() / 2), sorted.end());
  const double typical = sorted[sorted.size() / 2];
  std::vector<std::pair<double, size_t>> departs;  // (how far, step i: between timed[i] and timed[i + 1])
  for (size_t i = 0; i < d.size(); ++i) {
    const double off = std::abs(d[i] - typical);
    const double tol = std::max(0.03 * std::max(timed[i].second, timed[i + 1].second), 2 * std::abs(typical));
    if (off > tol && timed[i + 1].first - timed[i].first > fine) departs.push_back({off, i});
  }
  std::sort(departs.begin(), departs.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  if (departs.size() > max_steps) departs.resize(max_steps);
  for (const auto& [off, i] : departs)
    for (int64_t r = timed[i].first + fine; r < timed[i + 1].first; r += fine) out.push_back(r);
  std::sort(out.begin(), out.end());
  return out;
}

SweepPlan plan_sweep(const ProfileOptions& o) {
  SweepPlan p;
  if (o.samples < 1) throw InputError("", "--samples", "a sample count >= 1 (20 or more for a full profile)");
  if (o.warmup < 0) throw InputError("", "--warmup", "a warm-up count >= 0");
  p.quick = o.quick;
  p.samples = o.samples;
  p.warmup = o.warmup;
  if (!(o.duty > 0) || o.duty > 1)
    throw InputError("", "--duty", fmt::format("a share of time in (0, 1] (1: back to back), got {:g}", o.duty));
  p.duty = o.duty;
  p.transfer_sizes = log_sizes(o.min_bytes, o.max_bytes);
  p.collective_sizes = log_sizes(o.min_bytes, std::max(o.min_bytes, o.coll_max_bytes));
  p.nop2p_collective_sizes = log_sizes(o.min_bytes, std::max(o.min_bytes, o.nop2p_coll_max_bytes));
  p.tokens = token_counts(o.max_tokens);
  if (o.quick) {
    // Keep the ends of each sweep and a few points between: the curve's shape, in seconds.
    auto thin = [](std::vector<int64_t> v, size_t keep) {
      if (v.size() <= keep) return v;
      std::vector<int64_t> out;
      for (size_t i = 0; i < keep; ++i) out.push_back(v[i * (v.size() - 1) / (keep - 1)]);
      return out;
    };
    p.transfer_sizes = thin(p.transfer_sizes, 5);
    p.collective_sizes = thin(log_sizes(o.min_bytes, std::min<int64_t>(o.coll_max_bytes, 64 << 20)), 4);
    p.nop2p_collective_sizes = thin(log_sizes(o.min_bytes, std::min<int64_t>(o.nop2p_coll_max_bytes, 16 << 20)), 3);
    p.tokens = thin(token_counts(std::min<int64_t>(o.max_tokens, 256)), 3);
    p.samples = std::min(p.samples, 5);
    p.warmup = std::min(p.warmup, 1);
  }
  return p;
}

double compute_idle_s(double region_s, double duty) {
  if (!(duty > 0) || duty >= 1 || !(region_s > 0)) return 0;
  return std::min(region_s * (1.0 / duty - 1.0), 0.05);
}

int reps_for(int64_t bytes, double expected_gbps, double target_s, int max_reps) {
  if (bytes <= 0 || !(expected_gbps > 0)) return 1;
  double one = double(bytes) / (expected_gbps * 1e9);
  int r = int(std::ceil(target_s / one));
  return std::clamp(r, 1, max_reps);
}

}  // namespace peerplan::profiler
