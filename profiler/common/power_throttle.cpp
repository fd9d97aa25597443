#include "profiler/common/power_throttle.hpp"

#include <algorithm>
#include <cmath>

#include "planner/core/error.hpp"

namespace peerplan::profiler {
namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace

PowerThrottle analyse_power_throttle(const std::vector<double>& call_s) {
  if (call_s.size() < 20) throw RuntimeError("power throttle: too few calls timed (" + std::to_string(call_s.size()) + ")");
  std::vector<double> start(call_s.size());
  double t = 0;
  for (size_t i = 0; i < call_s.size(); ++i) start[i] = t, t += call_s[i];
  std::vector<double> first;
  for (size_t i = 0; i < call_s.size() && (start[i] < 15e-3 || first.size() < 3); ++i) first.push_back(call_s[i]);
  const size_t tail = call_s.size() * 6 / 10;
  PowerThrottle p;
  p.boost_s = median(first);
  p.sustained_s = median(std::vector<double>(call_s.begin() + long(tail), call_s.end()));
  p.factor = std::max(1.0, p.sustained_s / p.boost_s);
  p.onset_s = t;
  if (p.factor < 1.02) {
    p.factor = 1;
    return p;
  }
  const double half = 0.5 * (p.boost_s + p.sustained_s);
  for (size_t i = 0; i + 5 <= call_s.size(); ++i) {
    if (median(std::vector<double>(call_s.begin() + long(i), call_s.begin() + long(i) + 5)) > half) {
      p.onset_s = start[i];
      break;
    }
  }
  return p;
}

ThrottleMix analyse_throttle_mix(const std::vector<MixCall>& calls) {
  ThrottleMix m;
  double boost_total[3] = {0, 0, 0};
  for (int c = 0; c < 3; ++c) {
    std::vector<double> all, first;
    for (const MixCall& x : calls)
      if (int(x.cls) == c) {
        all.push_back(x.duration_s);
        if (x.start_s < 15e-3 || first.size() < 2) first.push_back(x.duration_s);
      }
    if (all.size() < 5) continue;  // too few to tell boost from sustained: factor 1
    const double boost = median(first);
    const double sustained = median(std::vector<double>(all.begin() + long(all.size() * 6 / 10), all.end()));
    const double f = std::max(1.0, sustained / boost);
    (c == 0 ? m.gemm : c == 1 ? m.attention : m.elementwise) = f;
    boost_total[c] = boost * double(all.size());
  }
  const double ga = boost_total[0] + boost_total[1];
  m.attention_share = ga > 0 ? boost_total[1] / ga : 0.0;
  return m;
}

std::vector<ThrottleMix> complete_mixes(std::vector<ThrottleMix> mixes, const std::vector<std::array<bool, 3>>& ran) {
  if (ran.size() != mixes.size()) throw RuntimeError("complete_mixes: one `ran` entry per mix expected");
  std::vector<size_t> order(mixes.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return mixes[a].attention_share < mixes[b].attention_share; });
  std::vector<ThrottleMix> m;
  std::vector<std::array<bool, 3>> r;
  for (size_t i : order)
    if (m.empty() || mixes[i].attention_share > m.back().attention_share) m.push_back(mixes[i]), r.push_back(ran[i]);
  auto field = [](ThrottleMix& x, int c) -> double& { return c == 0 ? x.gemm : c == 1 ? x.attention : x.elementwise; };
  for (int c = 0; c < 3; ++c)
    for (size_t i = 0; i < m.size(); ++i) {
      if (r[i][size_t(c)]) continue;
      size_t best = m.size();  // the nearest mix by share that ran this class
      for (size_t j = 0; j < m.size(); ++j)
        if (r[j][size_t(c)] && (best == m.size() || std::abs(m[j].attention_share - m[i].attention_share) <
                                                        std::abs(m[best].attention_share - m[i].attention_share)))
          best = j;
      if (best < m.size()) field(m[i], c) = field(m[best], c);
    }
  return m;
}

}  // namespace peerplan::profiler
