#include "planner/cost/attention_grid.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

namespace peerplan {
namespace {

struct Pt {
  double x, c, log_t, log_w;  // row coordinate (q_len or batch), context, log seconds, log work
};

// Interpolates log efficiency, log(seconds / work), along one row's contexts (sorted), linearly in
// log context; beyond the row's measured contexts the edge value, with `out` set.
double along_row(const std::vector<Pt>& row, double c, bool& out) {
  auto le = [](const Pt& p) { return p.log_t - p.log_w; };
  if (c <= row.front().c) {
    out = out || c < row.front().c;
    return le(row.front());
  }
  if (c >= row.back().c) {
    out = out || c > row.back().c;
    return le(row.back());
  }
  auto it = std::lower_bound(row.begin(), row.end(), c, [](const Pt& p, double v) { return p.c < v; });
  const Pt& b = *it;
  const Pt& a = *(it - 1);
  const double f = (std::log(c) - std::log(a.c)) / (std::log(b.c) - std::log(a.c));
  return le(a) + f * (le(b) - le(a));
}

bool same_head(const AttentionTime& a, const AttentionShape& s) {
  return a.phase == (s.prefill ? "prefill" : "decode") && a.heads == s.heads && a.kv_heads == s.kv_heads &&
         a.head_dim == s.head_dim && a.kv_dtype == s.kv_dtype &&
         attention_v_dim(a.v_dim, a.head_dim) == attention_v_dim(s.v_dim, s.head_dim);
}

AttentionShape shape_of(const AttentionTime& a) {
  AttentionShape s;
  s.prefill = a.phase == "prefill";
  s.batch = a.batch, s.q_len = a.q_len, s.context = a.context;
  s.heads = a.heads, s.kv_heads = a.kv_heads, s.head_dim = a.head_dim, s.kv_dtype = a.kv_dtype;
  s.v_dim = a.v_dim;
  return s;
}

// The price from the points `use` of table (all of one phase and head shape).
std::optional<ComputePrice> price(const std::vector<const AttentionTime*>& use, const AttentionShape& s) {
  // Prefill: rows are q_len at the shape's batch (or batch 1, priced per sequence); decode: rows are batches.
  int64_t batch_used = s.batch;
  if (s.prefill) {
    bool have = std::any_of(use.begin(), use.end(), [&](const AttentionTime* a) { return a->batch == s.batch; });
    if (!have) batch_used = 1;
  }
  std::map<double, std::vector<Pt>> rows;
  for (const AttentionTime* a : use) {
    if (s.prefill && a->batch != batch_used) continue;
    if (!s.prefill && a->q_len != 1) continue;
    if (a->time.median <= 0) continue;
    const double w = attention_work(shape_of(*a));
    if (w <= 0) continue;
    const double x = s.prefill ? double(a->q_len) : double(a->batch);
    rows[x].push_back({x, double(a->context), std::log(a->time.median), std::log(w)});
  }
  if (rows.empty()) return std::nullopt;
  for (auto& [x, r] : rows) std::sort(r.begin(), r.end(), [](const Pt& a, const Pt& b) { return a.c < b.c; });
  const double x = s.prefill ? double(s.q_len) : double(s.batch);
  const double c = double(s.context);
  AttentionShape per_seq = s;
  per_seq.batch = batch_used;
  const double work = attention_work(per_seq);
  const double scale = s.prefill ? double(s.batch) / double(batch_used) : 1.0;
  // Exact point.
  auto exact = rows.find(x);
  if (exact != rows.end())
    for (const Pt& p : exact->second)
      if (p.c == c) return ComputePrice{std::exp(p.log_t) * scale, batch_used == s.batch ? CostSource::Measured : CostSource::Interpolated};
  bool out = false;
  double le;
  auto hi = rows.lower_bound(x);
  if (hi == rows.end()) {  // beyond the largest row
    out = true;
    le = along_row(std::prev(hi)->second, c, out);
  } else if (hi == rows.begin()) {
    out = out || hi->first != x;
    le = along_row(hi->second, c, out);
  } else if (hi->first == x) {
    le = along_row(hi->second, c, out);
  } else {
    auto lo = std::prev(hi);
    // A row's measured contexts start at its own q_len (causal: context >= q_len), so the upper
    // row may not reach down to c: its edge value then stands in, which is not extrapolation
    // beyond the grid (the lower row covers c).
    bool out_lo = false, out_hi = false;
    const double a = along_row(lo->second, c, out_lo);
    const double b = along_row(hi->second, c, out_hi);
    out = out_lo || (out_hi && c > hi->second.back().c);
    const double f = (std::log(x) - std::log(lo->first)) / (std::log(hi->first) - std::log(lo->first));
    le = a + f * (b - a);
  }
  ComputePrice p{std::exp(le) * work * scale, out ? CostSource::Extrapolated : CostSource::Interpolated};
  return p;
}

std::vector<const AttentionTime*> select(const std::vector<AttentionTime>& table, int gpu, const AttentionShape& s,
                                         const std::vector<bool>* skip) {
  std::vector<const AttentionTime*> use;
  for (int pass = 0; pass < 2 && use.empty(); ++pass)
    for (size_t i = 0; i < table.size(); ++i) {
      const AttentionTime& a = table[i];
      if (!(skip && (*skip)[i]) && same_head(a, s) && (pass == 1 || a.gpu == gpu)) use.push_back(&a);
    }
  return use;
}

}  // namespace

double attention_work(const AttentionShape& s) {
  const double q = double(std::max<int64_t>(s.q_len, 1));
  const double c = double(std::max<int64_t>(s.context, s.q_len));
  return double(std::max<int64_t>(s.batch, 1)) * q * (c - (q - 1) / 2.0);
}

std::optional<ComputePrice> attention_from_grid(const std::vector<AttentionTime>& table, int gpu,
                                                const AttentionShape& s) {
  auto use = select(table, gpu, s, nullptr);
  if (use.empty()) return std::nullopt;
  return price(use, s);
}

std::vector<double> attention_grid_holdout(const std::vector<AttentionTime>& table, const std::vector<size_t>& held) {
  std::vector<bool> skip(table.size(), false);
  for (size_t i : held) skip.at(i) = true;  // all held back at once: none helps price another
  std::vector<double> err;
  for (size_t i : held) {
    const AttentionTime& a = table.at(i);
    const AttentionShape s = shape_of(a);
    auto use = select(table, a.gpu, s, &skip);
    std::optional<ComputePrice> p = use.empty() ? std::nullopt : price(use, s);
    err.push_back(p && a.time.median > 0 ? p->seconds / a.time.median - 1.0 : std::numeric_limits<double>::quiet_NaN());
  }
  return err;
}

}  // namespace peerplan
