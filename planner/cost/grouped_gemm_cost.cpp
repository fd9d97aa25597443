#include "planner/cost/grouped_gemm_cost.hpp"

#include <algorithm>
#include <cstdlib>
#include <map>

#include "planner/compile/graph_batch.hpp"
#include "planner/core/dtype.hpp"
#include "planner/model/moe_kernel_class.hpp"

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

// The decode-like points (at most 2 rows per expert: weight-bound, so time = c0 + touched x one
// weight read) launch_intercept fits.
bool decode_like(const GroupedGemmTime& g) { return g.rows <= 2 * g.touched; }

// Whether the points hold decode-like ones at two touched counts or more: enough for an intercept.
bool two_touched_counts(const std::vector<const GroupedGemmTime*>& pts) {
  int64_t first = -1;
  for (const GroupedGemmTime* g : pts) {
    if (!decode_like(*g)) continue;
    if (first < 0) first = g->touched;
    else if (g->touched != first) return true;
  }
  return false;
}

// The launch's fixed part: the intercept of time against touched experts over the decode-like
// points, least squares; 0 without two such points of different touched counts; never negative
// nor above half the fastest point.
double launch_intercept(const std::vector<const GroupedGemmTime*>& pts) {
  double n = 0, sx = 0, sy = 0, sxx = 0, sxy = 0, fastest = 1e300;
  for (const GroupedGemmTime* g : pts) {
    fastest = std::min(fastest, g->time.median);
    if (!decode_like(*g)) continue;
    const double x = double(g->touched), y = g->time.median;
    n += 1, sx += x, sy += y, sxx += x * x, sxy += x * y;
  }
  const double den = n * sxx - sx * sx;
  if (n < 2 || !(den > 1e-9 * n * sxx)) return 0;
  const double slope = (n * sxy - sx * sy) / den;
  return std::clamp((sy - slope * sx) / n, 0.0, 0.5 * fastest);
}

// The cuBLAS path's part besides its per-expert calls, at `rows` routed rows: a + b rows fitted over
// (rows, part) points, least squares (the gather of gate_up's rows grows with them; the offsets' copy
// and synchronisation do not), b not negative; the median of the points where they span one row count.
double path_part(std::vector<std::pair<double, double>> pts, double rows) {
  double n = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (const auto& [x, y] : pts) n += 1, sx += x, sy += y, sxx += x * x, sxy += x * y;
  const double den = n * sxx - sx * sx;
  if (n >= 2 && den > 1e-9 * n * sxx) {
    const double b = (n * sxy - sx * sy) / den;
    if (b > 0) return (sy - b * sx) / n + b * rows;
  }
  std::nth_element(pts.begin(), pts.begin() + long(pts.size() / 2), pts.end(),
                   [](const auto& a, const auto& b) { return a.second < b.second; });
  return pts[pts.size() / 2].second;
}

}  // namespace

bool grouped_op_takes_cublas(const Op& op, double min_gflop) {
  return op.group_tokens > kGraphTimedMaxRows &&
         moe_cublas_path(op.m, op.batch_count, op.group_max_rows, op.n, op.k, min_gflop);
}

std::optional<ComputePrice> grouped_gemm_from_table(const std::vector<GroupedGemmTime>& table, int gpu, const Op& op,
                                                    double cublas_min_gflop, double floor_s) {
  const std::string dtype = dtype_name(op.wdtype);
  // Rows of the op's path only (moe_cublas_path): per expert, cuBLASLt and the grouped kernel differ up
  // to 3x, and Mixtral int8's prefill at 257-511 tokens, priced between the grouped row of 256 tokens
  // and the cuBLAS one of 512, ran 13-16 % under its price (H100, session 25). Rows of either path when
  // the profile has none of the op's (profiles before session 13 time the grouped kernel only).
  // An eager op needs an eager row of its path (a call of more than kGraphTimedMaxRows tokens) to go by:
  // session 23's profiles ran every eager FP8 call on cuBLAS whatever its FLOPs (their rule said so), so a
  // Qwen1.5-MoE fp8 prefill the rule now keeps grouped would be priced from the graph rows (<= 256 tokens)
  // alone, extrapolated 30x (its long-prompt TTFT +77 %); there all rows price it, as before.
  const bool eager = op.group_tokens > kGraphTimedMaxRows;
  const bool cublas = grouped_op_takes_cublas(op, cublas_min_gflop);  // implies eager
  bool path_rows = false;
  for (const GroupedGemmTime& g : table)
    path_rows = path_rows || (g.n == op.n && g.k == op.k && g.dtype == dtype && g.cublas == cublas &&
                              (!eager || g.tokens > kGraphTimedMaxRows));
  // Rows timed on the op's own kernel first (moe_kernel_class.hpp): a row of another kernel is
  // another cost curve. DeepSeek-V2-Lite at 4 tokens: max_rows-2 layers priced from the only row
  // of their (rows, touched), timed with max_rows 3 on the 4-rows-per-pass gemv, cost 137 us a
  // layer for 104 and put decode steps at graph batch 4 0.6 ms (11 %) over (H200, 2026-12-04,
  // session 10 A). Rows of any kernel only when the profile has none of the op's (this GPU's
  // rows first, any GPU's otherwise).
  const int cls = moe_kernel_class(op.group_max_rows);
  // Only at the gemv's sizes (busiest expert <= 4 rows: decode), where one row more changes the kernel
  // and the cost per expert by up to 60 %; the stream and tiled kernels' rows stay one curve: kept apart
  // too, Qwen1.5-MoE's long-prompt TTFT moved +4.3 -> +6.9 % offline (session 10 A).
  const bool gemv = moe_gemv_class(op.group_max_rows);
  for (int pass = 0; pass < 2; ++pass) {
    std::vector<const GroupedGemmTime*> all, own;
    for (const GroupedGemmTime& g : table) {
      if (g.n != op.n || g.k != op.k || g.dtype != dtype || g.touched <= 0 || (pass == 0 && g.gpu != gpu)) continue;
      if (path_rows && g.cublas != cublas) continue;
      all.push_back(&g);
      if (gemv && moe_kernel_class(g.max_rows) == cls) own.push_back(&g);
    }
    if (all.empty()) continue;
    // Even one row of the op's kernel: at decode sizes an expert's cost is its weight read, flat in
    // its rows (one point suffices); another kernel's rows are another cost. Session 8 D's profile
    // (one routing per token count) re-priced DeepSeek-V2-Lite's chat TPOT -6.8 % so, -15.7 % when
    // a single row of the kernel fell back to all rows (measured 7.09 ms).
    const std::vector<const GroupedGemmTime*>& pts_of = own.empty() ? all : own;
    const GroupedGemmTime* exact = nullptr;
    for (const GroupedGemmTime* g : pts_of)
      if (g->rows == op.m && g->touched == op.batch_count &&
          (!exact || std::abs(g->max_rows - op.group_max_rows) < std::abs(exact->max_rows - op.group_max_rows)))
        exact = g;
    if (exact) return ComputePrice{exact->time.median, CostSource::Measured};
    // The launch's fixed part: from the kernel's own rows when three of them touch 8 experts or more
    // (where time is linear in touched experts: DeepSeek-V2-Lite's gemv-2 rows at 10, 19 and 36 experts
    // give ~5 us and a flat ~2.7 us per expert; fitted over every kernel's rows the 10-expert point
    // cost 3.2 per expert and decode at 4 tokens was priced 0.3 ms high, session 10 A), or when they
    // time it at two touched counts or more: every kernel's rows are as many lines (each its launch,
    // its cost per expert), and the fit across them can come out at a launch of 0 that the kernel's
    // own rows do not have. Mixtral's expert down (int8, H100, session 26 P): the 2-rows gemv at 3 and
    // 5 experts, 75.3 and 106.1 us, is 29 us + 15.4 per expert; the fit across the 1-, 2- and 3-4-rows
    // kernels gave 0, so an expert cost 21-25 us and a layer of 6 or 7 experts 20-25 % over the line.
    // Else from every row of the shape (Mixtral EP2's 4 local experts: one expert with 2 rows streams
    // at 2.1 TB/s, four at 4: not linear, and a fit over them alone gave a 27 us launch).
    int wide = 0;
    for (const GroupedGemmTime* g : own) wide += g->touched >= 8;
    const bool own_launch = &pts_of == &own && (wide >= 3 || two_touched_counts(own));
    const double c0 = launch_intercept(own_launch ? own : all);
    // Rows per expert -> time per expert (launch part removed); points of equal rows per expert
    // (from different touched counts) are averaged.
    std::map<double, std::pair<double, int>> per;
    for (const GroupedGemmTime* g : pts_of) {
      auto& [sum, n] = per[double(g->rows) / double(g->touched)];
      sum += std::max(g->time.median - c0, 0.0) / double(g->touched);
      ++n;
    }
    std::vector<std::pair<double, double>> pts;
    for (const auto& [r, sn] : per) pts.push_back({r, sn.first / double(sn.second)});
    CostSource src = CostSource::Measured;
    auto w = [&](double r) {
      if (cublas && path_rows && pts.size() >= 2 && r < pts[0].first) {
        // Below the smallest rows per expert of the op's path (the cuBLAS path's rows start at a 512-token
        // call: Mixtral's 128 rows per expert): the line through its two smallest points, not under the
        // expert's weight read (floor_s; else in proportion to rows), not over the smallest point's time.
        // A flat price put Mixtral int8's 431-token prefill at 1.10x its measured step (H100, session 26 P);
        // the line through 128 and 256 rows per expert gives the layer's measured 843 us within 1 %.
        const auto [r0, t0] = pts[0];
        const auto [r1, t1] = pts[1];
        const double line = t0 + (r - r0) * (t1 - t0) / (r1 - r0);
        src = weaker(src, CostSource::Extrapolated);
        return std::min(t0, std::max(line, floor_s > 0 ? floor_s : t0 * r / r0));
      }
      if (gemv && !own.empty() && r > pts.back().first) {
        // A gemv reads each touched expert's weights once whatever its rows (up to its kernel's 4): past
        // the kernel's largest rows per expert measured, an expert costs what it cost there, not more in
        // proportion (that is the compute-bound rule of the other kernels). Mixtral int8 on one H100
        // (session 26 P): the 2-rows gemv's gate_up ran 41.4 and 41.1 us per expert at 1.33 and 1.6 rows
        // per expert, the 3-4-rows one 63.5, 64.2, 62.8 and 63.0 at 1.33 to 2.29: flat.
        src = weaker(src, CostSource::Extrapolated);
        return pts.back().second;
      }
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

std::optional<ComputePrice> cublas_experts_from_table(const std::vector<ExpertGemmTime>& experts,
                                                      const std::vector<GroupedGemmTime>& grouped, int gpu,
                                                      const Op& op, double cublas_min_gflop) {
  if (op.group_expert_rows.empty() || !grouped_op_takes_cublas(op, cublas_min_gflop)) return std::nullopt;
  const std::string dtype = dtype_name(op.wdtype);
  for (int pass = 0; pass < 2; ++pass) {
    auto mine = [&](int g_gpu, int64_t n, int64_t k, const std::string& d) {
      return n == op.n && k == op.k && d == dtype && (pass == 1 || g_gpu == gpu);
    };
    std::map<int64_t, std::pair<double, int>> by_rows;  // rows -> (sum of medians, count): GPUs averaged
    for (const ExpertGemmTime& e : experts) {
      if (!mine(e.gpu, e.n, e.k, e.dtype) || e.rows <= 0) continue;
      auto& [sum, n] = by_rows[e.rows];
      sum += e.time.median;
      ++n;
    }
    if (by_rows.size() < 2) continue;
    std::vector<double> xs, ts;  // ascending rows
    for (const auto& [r, sn] : by_rows) xs.push_back(double(r)), ts.push_back(sn.first / double(sn.second));
    auto w = [&](double r) {
      if (r <= xs.front()) return ts.front();  // a weight read and a launch whatever its rows
      if (r >= xs.back()) return ts.back() * r / xs.back();
      const size_t j = size_t(std::upper_bound(xs.begin(), xs.end(), r) - xs.begin());
      return ts[j - 1] + (r - xs[j - 1]) * (ts[j] - ts[j - 1]) / (xs[j] - xs[j - 1]);
    };
    auto sum_w = [&](const auto& rows) {
      double t = 0;
      for (auto r : rows)
        if (r > 0) t += w(double(r));
      return t;
    };
    // The path's own part at each grouped row: (rows, time - sum of its experts' calls).
    std::vector<std::pair<double, double>> own;
    for (const GroupedGemmTime& g : grouped)
      if (g.cublas && !g.expert_rows.empty() && mine(g.gpu, g.n, g.k, g.dtype))
        own.push_back({double(g.rows), g.time.median - sum_w(g.expert_rows)});
    if (own.empty()) continue;
    const ExpertRows& er = op.group_expert_rows;
    const double t = path_part(own, double(op.m)) + sum_w(*er.rows) / double(er.layers);
    // Summed from per-expert points: a shape, never a measured row of the op's (rows, touched); past the
    // curve's largest rows (er.rows ascends), extrapolated.
    const bool beyond = double(er.rows->back()) > xs.back();
    return ComputePrice{std::max(t, 0.0), beyond ? CostSource::Extrapolated : CostSource::Interpolated};
  }
  return std::nullopt;
}

}  // namespace peerplan
