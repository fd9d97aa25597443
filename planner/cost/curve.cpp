#include "planner/cost/curve.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

namespace peerplan {

const char* to_string(CostSource s) {
  switch (s) {
    case CostSource::Measured: return "measured";
    case CostSource::Interpolated: return "interpolated";
    case CostSource::Extrapolated: return "extrapolated";
    case CostSource::Fitted: return "fitted";
    case CostSource::Derived: return "derived";
    case CostSource::Nominal: return "nominal";
  }
  return "?";
}

CostSource weaker(CostSource a, CostSource b) { return int(a) > int(b) ? a : b; }

AlphaBeta fit_alpha_beta(const std::vector<CurvePoint>& pts) {
  if (pts.empty()) throw std::invalid_argument("fit_alpha_beta: no points");
  AlphaBeta ab;
  if (pts.size() == 1) {
    ab.beta_Bps = double(pts[0].bytes) / std::max(pts[0].time.median, 1e-12);
    return ab;
  }
  // Weighted least squares with w = 1/t^2: minimises the relative error of t = a + c*n.
  double s0 = 0, s1 = 0, s2 = 0, t0 = 0, t1 = 0;
  for (const CurvePoint& p : pts) {
    double t = std::max(p.time.median, 1e-12), n = double(p.bytes), w = 1.0 / (t * t);
    s0 += w;
    s1 += w * n;
    s2 += w * n * n;
    t0 += w * t;
    t1 += w * n * t;
  }
  double det = s0 * s2 - s1 * s1;
  double a = 0, c = 0;
  if (std::abs(det) > 0) {
    a = (t0 * s2 - s1 * t1) / det;
    c = (s0 * t1 - s1 * t0) / det;
  }
  if (a < 0 || std::abs(det) == 0) {  // a negative fixed cost is unphysical: fit through the origin
    a = 0;
    c = t1 / s2;
  }
  ab.alpha_s = a;
  ab.beta_Bps = c > 0 ? 1.0 / c : std::numeric_limits<double>::infinity();
  return ab;
}

CurveTime curve_time(const std::vector<CurvePoint>& pts, double bytes) {
  if (pts.empty()) throw std::invalid_argument("curve_time: empty curve");
  bytes = std::max(bytes, 1.0);
  auto t_of = [](const CurvePoint& p) { return std::max(p.time.median, 1e-12); };
  const CurvePoint& lo = pts.front();
  const CurvePoint& hi = pts.back();
  if (bytes > double(hi.bytes)) {
    // Bandwidth of the top of the curve (its last few points) carries the extra bytes.
    std::vector<CurvePoint> top(pts.end() - std::min<ptrdiff_t>(4, ptrdiff_t(pts.size())), pts.end());
    AlphaBeta ab = fit_alpha_beta(top);
    return {t_of(hi) + (bytes - double(hi.bytes)) / ab.beta_Bps, CostSource::Extrapolated};
  }
  if (bytes < double(lo.bytes)) {
    std::vector<CurvePoint> bottom(pts.begin(), pts.begin() + std::min<ptrdiff_t>(4, ptrdiff_t(pts.size())));
    AlphaBeta ab = fit_alpha_beta(bottom);
    double t = t_of(lo) - (double(lo.bytes) - bytes) / ab.beta_Bps;
    return {std::max(t, std::min(ab.alpha_s, t_of(lo))), CostSource::Extrapolated};
  }
  auto it = std::lower_bound(pts.begin(), pts.end(), bytes,
                             [](const CurvePoint& p, double b) { return double(p.bytes) < b; });
  if (double(it->bytes) == bytes) return {t_of(*it), CostSource::Measured};
  const CurvePoint& b = *it;
  const CurvePoint& a = *(it - 1);
  double f = (std::log(bytes) - std::log(double(a.bytes))) / (std::log(double(b.bytes)) - std::log(double(a.bytes)));
  double lt = std::log(t_of(a)) + f * (std::log(t_of(b)) - std::log(t_of(a)));
  return {std::exp(lt), CostSource::Interpolated};
}

}  // namespace peerplan
