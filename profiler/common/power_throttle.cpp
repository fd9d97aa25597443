#include "profiler/common/power_throttle.hpp"

#include <algorithm>

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

}  // namespace peerplan::profiler
