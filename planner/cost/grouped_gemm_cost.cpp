#include "planner/cost/grouped_gemm_cost.hpp"

#include <algorithm>
#include <cstdlib>
#include <map>

#include "planner/core/dtype.hpp"

namespace peerplan {

double grouped_time(const std::function<double(double rows)>& per_expert, int64_t rows, int64_t touched,
                    int64_t max_rows) {
  if (rows <= 0 || touched <= 0) return 0;
  if (touched == 1) return per_expert(double(rows));
  const double mean = double(rows) / double(touched);
  if (double(max_rows) <= mean) return double(touched) * per_expert(mean);
  const double rest = double(rows - max_rows) / double(touched - 1);
  return per_expert(double(max_rows)) + double(touched - 1) * per_expert(std::max(rest, 1.0));
}

namespace {

// The launch's fixed part: the intercept of time against touched experts over the decode-like
// points (at most 2 rows per expert: weight-bound, so time = c0 + touched x one weight read),
// least squares; 0 without two such points of different touched counts; never negative nor
// above half the fastest point.
double launch_intercept(const std::vector<const GroupedGemmTime*>& pts) {
  double n = 0, sx = 0, sy = 0, sxx = 0, sxy = 0, fastest = 1e300;
  for (const GroupedGemmTime* g : pts) {
    fastest = std::min(fastest, g->time.median);
    if (g->rows > 2 * g->touched) continue;
    const double x = double(g->touched), y = g->time.median;
    n += 1, sx += x, sy += y, sxx += x * x, sxy += x * y;
  }
  const double den = n * sxx - sx * sx;
  if (n < 2 || !(den > 1e-9 * n * sxx)) return 0;
  const double slope = (n * sxy - sx * sy) / den;
  return std::clamp((sy - slope * sx) / n, 0.0, 0.5 * fastest);
}

}  // namespace

std::optional<ComputePrice> grouped_gemm_from_table(const std::vector<GroupedGemmTime>& table, int gpu, const Op& op) {
  const std::string dtype = dtype_name(op.wdtype);
  for (int pass = 0; pass < 2; ++pass) {
    std::vector<const GroupedGemmTime*> pts_of;
    const GroupedGemmTime* exact = nullptr;
    for (const GroupedGemmTime& g : table) {
      if (g.n != op.n || g.k != op.k || g.dtype != dtype || g.touched <= 0 || (pass == 0 && g.gpu != gpu)) continue;
      if (g.rows == op.m && g.touched == op.batch_count &&
          (!exact || std::abs(g.max_rows - op.group_max_rows) < std::abs(exact->max_rows - op.group_max_rows)))
        exact = &g;
      pts_of.push_back(&g);
    }
    if (exact) return ComputePrice{exact->time.median, CostSource::Measured};
    if (pts_of.empty()) continue;
    const double c0 = launch_intercept(pts_of);
    // Rows per expert -> time per expert (launch part removed); points of equal rows per expert
    // (from different touched counts) are averaged.
    std::map<double, std::pair<double, int>> per;
    for (const GroupedGemmTime* g : pts_of) {
      auto& [sum, n] = per[double(g->rows) / double(g->touched)];
      sum += (g->time.median - c0) / double(g->touched);
      ++n;
    }
    std::vector<std::pair<double, double>> pts;
    for (const auto& [r, sn] : per) pts.push_back({r, sn.first / double(sn.second)});
    CostSource src = CostSource::Measured;
    auto w = [&](double r) {
      ComputePrice p = from_points(pts, r);
      src = weaker(src, p.source);
      return p.seconds;
    };
    const double t = c0 + grouped_time(w, op.m, op.batch_count, op.group_max_rows);
    // A measured rows-per-expert point reused for another (rows, touched) is not this shape.
    return ComputePrice{t, src == CostSource::Measured ? CostSource::Interpolated : src};
  }
  return std::nullopt;
}

}  // namespace peerplan
