#include "profiler/common/profile_compare.hpp"

#include <algorithm>
#include <cmath>
#include <map>

#include <fmt/format.h>

#include "planner/core/error.hpp"
#include "profiler/common/bus_bw.hpp"
#include "profiler/common/sweep.hpp"

namespace peerplan::profiler {

namespace {

std::string endpoint(int id) { return id < 0 ? "host" : "gpu" + std::to_string(id); }

std::string gpus_of(const std::vector<int>& g) {
  std::string s;
  for (int x : g) s += (s.empty() ? "" : ",") + std::to_string(x);
  return "[" + s + "]";
}

const CurvePoint* at(const std::vector<CurvePoint>& pts, int64_t bytes) {
  for (const auto& p : pts)
    if (p.bytes == bytes) return &p;
  return nullptr;
}

// Largest and smallest sizes present in both curves.
std::pair<int64_t, int64_t> common_sizes(const std::vector<CurvePoint>& a, const std::vector<CurvePoint>& b) {
  int64_t lo = -1, hi = -1;
  for (const auto& p : a)
    if (p.time.median > 0 && at(b, p.bytes) && at(b, p.bytes)->time.median > 0) {
      if (lo < 0 || p.bytes < lo) lo = p.bytes;
      if (p.bytes > hi) hi = p.bytes;
    }
  return {lo, hi};
}

double gbps(int64_t bytes, double s) { return s > 0 ? double(bytes) / s / 1e9 : 0; }

}  // namespace

ProfileComparison compare_profiles(const Machine& a, const Machine& b) {
  if (!a.measured() || !b.measured())
    throw InputError(!a.measured() ? a.source_file : b.source_file, "measurements",
                     "a measured profile (written by `peerplan profile`); this machine file has no measurements");
  ProfileComparison c;
  const Measurements &ma = *a.measurements, &mb = *b.measurements;
  if (a.gpu_count() != b.gpu_count())
    c.notes.push_back(fmt::format("GPU counts differ: {} vs {}", a.gpu_count(), b.gpu_count()));
  for (int i = 0; i < std::min(a.gpu_count(), b.gpu_count()); ++i)
    if (!a.gpus[size_t(i)].uuid.empty() && a.gpus[size_t(i)].uuid != b.gpus[size_t(i)].uuid) {
      c.notes.push_back("different GPUs (UUIDs differ): the profiles come from different hosts or GPU orders");
      break;
    }
  size_t only_a = 0;
  for (const auto& t : ma.transfers) {
    const TransferCurve* u = mb.find_transfer(t.src, t.dst, t.mode, t.variant);
    if (!u) { ++only_a; continue; }
    auto [lo, hi] = common_sizes(t.points, u->points);
    if (hi < 0) continue;
    std::string path = t.mode + (t.variant.empty() ? "" : "/" + t.variant) + " " + endpoint(t.src) + "->" + endpoint(t.dst);
    c.rows.push_back({"transfer", path + " @" + format_size(hi), "GB/s", gbps(hi, at(t.points, hi)->time.median),
                      gbps(hi, at(u->points, hi)->time.median)});
    if (lo != hi)
      c.rows.push_back({"transfer", path + " @" + format_size(lo) + " time", "us", at(t.points, lo)->time.median * 1e6,
                        at(u->points, lo)->time.median * 1e6});
  }
  for (const auto& k : ma.collectives) {
    const CollectiveCurve* u = mb.find_collective(k.op, k.gpus, k.p2p, k.graph);
    if (!u) { ++only_a; continue; }
    auto [lo, hi] = common_sizes(k.points, u->points);
    if (hi < 0) continue;
    CollOp op = coll_op_from_name(k.op);
    int n = int(k.gpus.size());
    std::string what = k.op + " " + gpus_of(k.gpus) + (k.p2p ? "" : " p2p-off") + (k.graph ? " in a graph" : "");
    c.rows.push_back({"collective", what + " @" + format_size(hi) + " busBw", "GB/s",
                      bus_bw_gbps(op, n, hi, at(k.points, hi)->time.median), bus_bw_gbps(op, n, hi, at(u->points, hi)->time.median)});
    if (lo != hi)
      c.rows.push_back({"collective", what + " @" + format_size(lo) + " time", "us", at(k.points, lo)->time.median * 1e6,
                        at(u->points, lo)->time.median * 1e6});
  }
  for (size_t i = 0; i < std::min(ma.hbm_gbps.size(), mb.hbm_gbps.size()); ++i)
    if (ma.hbm_gbps[i] > 0 && mb.hbm_gbps[i] > 0)
      c.rows.push_back({"hbm", "gpu" + std::to_string(i) + " device-local copy", "GB/s", ma.hbm_gbps[i], mb.hbm_gbps[i]});
  if (ma.launch_overhead_s > 0 && mb.launch_overhead_s > 0)
    c.rows.push_back({"launch", "empty-kernel launch, back to back", "us", ma.launch_overhead_s * 1e6, mb.launch_overhead_s * 1e6});
  // GEMMs: thousands of shapes; one summary row (geometric mean of B/A) plus the worst shape.
  // Keyed as the cost model reads rows: a quantized or strided-batched row is another call.
  std::map<std::tuple<int, int64_t, int64_t, int64_t, std::string, int64_t>, double> ga;
  for (const auto& g : ma.gemms) ga[{g.gpu, g.m, g.n, g.k, g.dtype, g.batch}] = g.time.median;
  double log_sum = 0, worst = -1;
  int matched = 0;
  const GemmTime* worst_g = nullptr;
  double worst_a = 0;
  for (const auto& g : mb.gemms) {
    auto it = ga.find({g.gpu, g.m, g.n, g.k, g.dtype, g.batch});
    if (it == ga.end() || it->second <= 0 || g.time.median <= 0) continue;
    double r = g.time.median / it->second;
    log_sum += std::log(r);
    ++matched;
    if (std::abs(r - 1) > worst) { worst = std::abs(r - 1); worst_g = &g; worst_a = it->second; }
  }
  if (matched) {
    c.rows.push_back({"gemm", fmt::format("{} shapes, geometric mean time", matched), "ratio", 1.0, std::exp(log_sum / matched)});
    c.rows.push_back({"gemm", fmt::format("worst shape gpu{} {}x{}x{} {}{}", worst_g->gpu, worst_g->m, worst_g->n, worst_g->k,
                                          worst_g->dtype, worst_g->batch != 1 ? fmt::format(" x{}", worst_g->batch) : ""),
                      "us",
                      worst_a * 1e6, worst_g->time.median * 1e6});
  }
  if (only_a) c.notes.push_back(fmt::format("{} curve(s) of A have no counterpart in B", only_a));
  std::stable_sort(c.rows.begin(), c.rows.end(), [](const CompareRow& x, const CompareRow& y) {
    return std::abs(x.diff()) > std::abs(y.diff());
  });
  std::vector<double> d;
  for (const auto& r : c.rows) d.push_back(std::abs(r.diff()));
  if (!d.empty()) {
    std::sort(d.begin(), d.end());
    c.max_abs_diff = d.back();
    c.median_abs_diff = d.size() % 2 ? d[d.size() / 2] : 0.5 * (d[d.size() / 2 - 1] + d[d.size() / 2]);
  }
  return c;
}

std::string format_comparison(const ProfileComparison& c, const std::string& na, const std::string& nb, size_t max_rows) {
  std::string s = fmt::format("A: {}\nB: {}\n", na, nb);
  for (const auto& n : c.notes) s += "note: " + n + "\n";
  s += fmt::format("\n  {:<11} {:<52} {:>14} {:>14} {:>8}\n", "kind", "figure", "A", "B", "B vs A");
  for (size_t i = 0; i < c.rows.size() && i < max_rows; ++i) {
    const auto& r = c.rows[i];
    s += fmt::format("  {:<11} {:<52} {:>9.2f} {:<4} {:>9.2f} {:<4} {:>+7.1f}%\n", r.kind, r.what, r.a, r.unit == "ratio" ? "" : r.unit,
                     r.b, r.unit == "ratio" ? "" : r.unit, 100 * r.diff());
  }
  if (c.rows.size() > max_rows) s += fmt::format("  ... {} more rows (smaller differences)\n", c.rows.size() - max_rows);
  s += fmt::format("\n{} figures compared: median |difference| {:.1f} %, largest {:.1f} %\n", c.rows.size(),
                   100 * c.median_abs_diff, 100 * c.max_abs_diff);
  return s;
}

}  // namespace peerplan::profiler
