#include "planner/cost/attention_grid.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <set>
#include <string>

#include "planner/compile/mla_memory.hpp"
#include "planner/core/error.hpp"

namespace peerplan {
namespace {

struct Pt {
  double x, c, log_t, log_w;  // row coordinate (q_len or batch), context, log seconds, log work
};

// log of what a point's time is divided by before interpolating: the attended pairs (log_w), or the
// prefill wave model, evaluated only at the points an interpolation uses (it schedules CTAs).
using LogNorm = std::function<double(const Pt&)>;

// Interpolates log efficiency, log(seconds / norm), along one row's contexts (sorted), linearly in
// log context; beyond the row's measured contexts the edge value, with `out` set.
double along_row(const std::vector<Pt>& row, double c, bool& out, const LogNorm& norm) {
  auto le = [&](const Pt& p) { return p.log_t - norm(p); };
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
  // Prefill on a GPU of known SM count: time / wave model (cuDNN's time steps with its query tiles
  // and waves and is flat between the steps; docs/attention.md "A wave model between grid points").
  const bool waves = s.prefill && s.sms > 0;
  auto model = [&](double q, double ctx) {
    return prefill_wave_model(batch_used, int64_t(q), int64_t(ctx), s.heads, s.sms);
  };
  const LogNorm norm = [&](const Pt& p) { return waves ? std::log(model(p.x, p.c)) : p.log_w; };
  const double work = waves ? model(double(s.q_len), double(s.context)) : attention_work(per_seq);
  const double scale = s.prefill ? double(s.batch) / double(batch_used) : 1.0;
  // Exact point.
  auto exact = rows.find(x);
  if (exact != rows.end())
    for (const Pt& p : exact->second)
      if (p.c == c) return ComputePrice{std::exp(p.log_t) * scale, batch_used == s.batch ? CostSource::Measured : CostSource::Interpolated};
  // With the wave model, only rows that reach c price it: covering c, or starting at their own
  // whole-prompt point (q, q), or ending at the table's largest context (the grid's edge). A held-back
  // row starts far above its q_len, and its edge stood in for whole prompts (8B prompts of 200-240 tokens
  // priced 8.6-13.7 us where the rows around measured ~19). The live attended-pairs rule keeps every row:
  // the recorded runs were met with it (docs/attention.md "Held-back rows" has the figures).
  double c_max = 0;
  for (const auto& [rx, r] : rows) c_max = std::max(c_max, r.back().c);
  auto usable = [&](const std::vector<Pt>& r) {
    if (!waves) return true;
    const bool low_ok = r.front().c <= c || r.front().c == r.front().x;
    const bool high_ok = c <= r.back().c || r.back().c == c_max;
    return low_ok && high_ok;
  };
  auto hi = rows.lower_bound(x);
  while (hi != rows.end() && !usable(hi->second)) ++hi;
  auto lo = rows.end();  // the nearest usable row below x
  for (auto it = rows.lower_bound(x); it != rows.begin();) {
    --it;
    if (usable(it->second)) {
      lo = it;
      break;
    }
  }
  if (hi == rows.end() && lo == rows.end()) {  // no row reaches c: every row's edge, as before
    hi = rows.lower_bound(x);
    if (hi != rows.begin()) lo = std::prev(hi);
  }
  bool out = false;
  double le;
  if (hi == rows.end()) {  // beyond the largest (usable) row
    out = true;
    le = along_row(lo->second, c, out, norm);
  } else if (lo == rows.end()) {
    out = out || hi->first != x;
    le = along_row(hi->second, c, out, norm);
  } else if (hi->first == x) {
    le = along_row(hi->second, c, out, norm);
  } else {
    // A row's measured contexts start at its own q_len (causal: context >= q_len), so the upper
    // row may not reach down to c: its edge value (its whole-prompt point) then stands in, which is
    // not extrapolation beyond the grid (the lower row covers c). Reading both rows at the chunk's context / q_len
    // instead fitted the study grid better (whole prompts between half-octave rows 14-18 % low) but
    // moved real runs away: Llama-3.1-8B's Azure TTFT p50 +5.3 -> +7.9 % (session 8 D), +2.7 points in
    // session 11 C (docs/attention.md "The grid on the GPU"); the quarter-octave rows from 128 tokens
    // now keep such prompts close to a row.
    bool out_lo = false, out_hi = false;
    const double a = along_row(lo->second, c, out_lo, norm);
    const double b = along_row(hi->second, c, out_hi, norm);
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

double prefill_wave_model(int64_t batch, int64_t q_len, int64_t context, int64_t heads, int sms) {
  constexpr int64_t kTile = 128, kBlock = 128;  // cuDNN's query tile; KV blocks of 128 keys
  constexpr double kFixed = 8.0;                // per call, in KV blocks (fitted: 4-16 all within 1 point)
  constexpr int64_t kExact = int64_t(1) << 16;  // more CTAs than this: the fluid limit (many waves)
  const int64_t q = std::max<int64_t>(q_len, 1), c = std::max<int64_t>(context, q);
  const int64_t b = std::max<int64_t>(batch, 1), h = std::max<int64_t>(heads, 1);
  const int64_t S = std::max(sms, 1);
  const int64_t tiles = (q + kTile - 1) / kTile;
  std::vector<int64_t> blocks(size_t(tiles), 0);
  double total = 0;
  for (int64_t i = 0; i < tiles; ++i) {
    blocks[size_t(i)] = (c - q + std::min((i + 1) * kTile, q) + kBlock - 1) / kBlock;
    total += double(blocks[size_t(i)]);
  }
  const int64_t ctas = b * h * tiles;
  const double longest = double(blocks.back());  // the last tile sees the whole context
  if (ctas <= S) return longest + kFixed;
  if (ctas > kExact) return std::max(longest, total * double(b * h) / double(S)) + kFixed;
  std::vector<int64_t> load(size_t(S), 0);  // a min-heap of the SMs' finishing times
  auto later = std::greater<int64_t>();
  for (int64_t n = 0; n < b * h; ++n)
    for (int64_t i = 0; i < tiles; ++i) {
      std::pop_heap(load.begin(), load.end(), later);
      load.back() += blocks[size_t(i)];
      std::push_heap(load.begin(), load.end(), later);
    }
  return double(*std::max_element(load.begin(), load.end())) + kFixed;
}

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

std::vector<double> attention_grid_holdout(const std::vector<AttentionTime>& table, const std::vector<size_t>& held,
                                           int sms) {
  std::vector<bool> skip(table.size(), false);
  for (size_t i : held) skip.at(i) = true;  // all held back at once: none helps price another
  std::vector<double> err;
  for (size_t i : held) {
    const AttentionTime& a = table.at(i);
    AttentionShape s = shape_of(a);
    s.sms = sms;
    auto use = select(table, a.gpu, s, &skip);
    std::optional<ComputePrice> p = use.empty() ? std::nullopt : price(use, s);
    err.push_back(p && a.time.median > 0 ? p->seconds / a.time.median - 1.0 : std::numeric_limits<double>::quiet_NaN());
  }
  return err;
}

namespace {

int geo_mid(int a, int b) { return int(std::lround(std::sqrt(double(a) * double(b)))); }

// lo x 2^(i / per_octave) rounded, i = 0, 1, ... while below hi, then hi; `keep(i, x)` filters.
template <class Keep>
std::vector<int> log_steps(int lo, int hi, int per_octave, Keep keep) {
  std::vector<int> v;
  for (int i = 0;; ++i) {
    const int x = int(std::lround(lo * std::pow(2.0, double(i) / per_octave)));
    if (x >= hi) break;
    if (keep(i, x)) v.push_back(x);
  }
  v.push_back(hi);
  return v;
}

}  // namespace

AttentionGridMode attention_grid_mode(const char* env_value) {
  const std::string v = env_value ? env_value : "";
  if (v.empty()) return AttentionGridMode::Default;
  if (v == "study") return AttentionGridMode::Study;
  if (v == "fine-prefill") return AttentionGridMode::FinePrefill;
  if (v == "fine-prefill-long") return AttentionGridMode::FinePrefillLong;
  throw InputError("", "PEERPLAN_ATTENTION_GRID",
                   "study, fine-prefill, fine-prefill-long or unset (the default grid), not '" + v + "'");
}

AttentionGridPlan attention_grid_plan(bool quick, int max_context, AttentionGridMode mode) {
  AttentionGridPlan g;
  if (quick) {
    g.quick = true;
    g.batches = {1, 32};
    g.contexts = {512, 4096};
    g.q_lens = {64, 512};
    g.held_prefill = {{181, 1448}};
    g.held_decode = {{6, 1448}};
    return g;
  }
  auto all = [](int, int) { return true; };
  if (mode == AttentionGridMode::FinePrefill) {  // scripts/attention_tile_axis_study.py's next data
    g.batches = {1};
    for (int q = 8; q <= 1024; q += 8) g.q_lens.push_back(q);
    for (int q = 1056; q <= 2048; q += 32) g.q_lens.push_back(q);
    for (int c : {512, 558, 609, 724, 1024, 1579, 4096, 16384})
      if (c <= max_context) g.contexts.push_back(c);
    return g;
  }
  if (mode == AttentionGridMode::FinePrefillLong) {  // the held-back misses past the tile rows (q 2233-6317)
    g.batches = {1};
    for (int t = 16; t < 64; ++t)
      for (int q : {t * 128 + 1, t * 128 + 64, (t + 1) * 128}) g.q_lens.push_back(q);
    for (int c : {8192, 16384})
      if (c <= max_context) g.contexts.push_back(c);
    return g;
  }
  if (mode == AttentionGridMode::Study) {  // the data the default grid is chosen from offline (scripts/attention_grid_design.py)
    for (int b = 1; b <= 16; ++b) g.batches.push_back(b);
    for (int b = 24; b <= 256; b += 8) g.batches.push_back(b);
    g.q_lens = log_steps(16, 8192, 4, all);
    g.contexts = log_steps(256, max_context, 4, all);
    return g;
  }
  // Chosen on the study grid (one H200, 2026-12-04, session 12 A: 9138 points of 32/8 and 16/16
  // heads d128, MLA decode and prefill; docs/attention.md "Choosing the grid"), every study point off
  // the grid priced by the rule above. Half-octave steps everywhere (the grid before) left the
  // worst error at 11-20 % per configuration, p95 3.6-5.5 %; this grid: worst 4.3-7.8 %, p95 1.3-3.1 %,
  // for ~30 % more profiling time:
  // - decode, every batch to 16 (a mixed iteration's decode part is unpadded; batch 14-15 priced
  //   from 12 and 16 were 7-10 % high at long context, MLA's 10-11 at 1448 13-20 %: the split plan
  //   steps), then vLLM's CUDA-graph batches, multiples of 8 (a decode step is priced at its padded
  //   batch, planner/compile/graph_batch.hpp); the launch-step rows come from the profiler;
  // - contexts, quarter-octave to 4096 (short decode contexts step with the kernels' 32-64 token
  //   chunks and cuDNN's tiles: 9-13 % between half-octave points), half-octave beyond;
  // - q_lens, half-octave to 128, quarter-octave from 128 (within a wave count cuDNN's time is not
  //   flat: 32 heads at 27554 context, 1218 -> 1448 tokens +15 %, both 3 waves), plus the wave rows;
  // - and rows on both sides of every query-tile boundary to 16 tiles (128 and 129, 256 and 257, ...,
  //   2048 and 2049): cuDNN's time moves with the tiles within a wave count too, by the fill of its last
  //   wave and not monotonically (32 heads at 16384: 10 and 11 tiles 667-678 us, 12 tiles 710-757; 64
  //   heads at 4096: 3 tiles 132-139, 4 tiles 140), which the wave model does not price; so a q_len to
  //   2048 is priced between rows of its own tile count (docs/attention.md "Rows at every tile boundary").
  for (int b = 1; b <= 16; ++b) g.batches.push_back(b);
  for (int b = 24; b <= 256; b += 8) g.batches.push_back(b);
  const std::vector<int> quarter = log_steps(16, 8192, 4, [](int i, int x) { return i % 2 == 0 || x >= 128; });
  g.q_lens = quarter;
  for (int q : attention_tile_rows(kTileRowsTo))
    if (std::find(g.q_lens.begin(), g.q_lens.end(), q) == g.q_lens.end()) g.q_lens.push_back(q);
  std::sort(g.q_lens.begin(), g.q_lens.end());
  g.contexts = log_steps(256, max_context, 4, [](int i, int x) { return i % 2 == 0 || x <= 4096; });
  // Held back: the geometric middles of every third cell of the quarter-octave rows (not of the tile
  // rows: the same points as before them, so profiles compare) x contexts, and decode batches between
  // rows (20, 44, 100: what mixed iterations can have) at the middles of every third context cell.
  const auto& C = g.contexts;
  for (size_t i = 1; i + 1 < quarter.size(); i += 3) {
    const int q = geo_mid(quarter[i], quarter[i + 1]);
    for (size_t j = 1; j + 1 < C.size(); j += 3)
      if (geo_mid(C[j], C[j + 1]) >= q) g.held_prefill.push_back({q, geo_mid(C[j], C[j + 1])});
  }
  for (int b : {20, 44, 100})
    for (size_t j = 1; j + 1 < C.size(); j += 3) {
      const int c = geo_mid(C[j], C[j + 1]);
      if (int64_t(b) * c <= g.max_tokens) g.held_decode.push_back({b, c});
    }
  return g;
}

std::vector<int> attention_tile_rows(int tiles) {
  constexpr int kTile = 128;
  std::vector<int> v;
  for (int t = 1; t <= tiles; ++t) {
    v.push_back(t * kTile);
    v.push_back(t * kTile + 1);
  }
  return v;
}

// cuDNN's fused attention runs a CTA per (128-row Q tile, head), so a chunk's time steps up where
// its tiles spill into one more wave of the SMs (study grid, H200 2026-12-03, 32 heads: ~1130 us
// at 77936 context for every q_len to 512, ~2130 from 609 to 1024, 3244 at 1218); interpolating
// across a step priced q_len 609 25 % low. Rows at the last q_len of a wave and the first of the
// next keep each interpolation on one side; the first eight boundaries (to 8192 tokens at 16
// heads, 4224 at 32; beyond them the quarter-octave rows are at most half a wave apart at 32 heads).
std::vector<int> attention_wave_rows(int heads, int sms, int max_q) {
  constexpr int kTile = 128;
  std::vector<int> v;
  if (heads <= 0 || sms <= 0) return v;
  auto waves = [&](int64_t tiles) { return (tiles * heads + sms - 1) / sms; };
  for (int64_t t = 1; t * kTile < max_q && v.size() < 16; ++t)
    if (waves(t + 1) > waves(t)) {
      v.push_back(int(t * kTile));
      v.push_back(int(t * kTile + 1));
    }
  return v;
}

std::vector<int> attention_launch_step_rows(const AttentionGridPlan& plan,
                                            const std::function<LaunchSpan(int, int)>& span) {
  std::set<int> rows;
  if (plan.batches.empty()) return {};
  const int max_b = plan.batches.back();
  for (int c : plan.contexts) {
    LaunchSpan prev = span(1, c);
    for (int b = 1; b < max_b && int64_t(b + 1) * c <= plan.max_tokens; ++b) {
      const LaunchSpan next = span(b + 1, c);
      if (next.span > 1.10 * prev.span || next.regime != prev.regime) rows.insert({b, b + 1});
      prev = next;
    }
  }
  std::vector<int> out;
  for (int b : rows)
    if (std::find(plan.batches.begin(), plan.batches.end(), b) == plan.batches.end()) out.push_back(b);
  return out;
}

LaunchSpan mla_decode_launch_span(int batch, int heads, int context, int sms) {
  constexpr int kTileRows = 32;  // mla_decode.cu's kBN
  const int tile = heads % 64 == 0 ? 64 : heads % 32 == 0 ? 32 : 16;  // its head_tile_of
  const int splits = mla_decode_split_count(batch, heads, context, sms, tile);
  const int64_t chunk = (int64_t(context) + splits - 1) / splits;
  const int64_t rows = (chunk + kTileRows - 1) / kTileRows * kTileRows;
  const int64_t ctas = int64_t(batch) * ((heads + tile - 1) / tile) * splits;
  const int64_t slots = int64_t(mla_decode_head_tile_residency(tile)) * std::max(sms, 1);
  const int64_t waves = (ctas + slots - 1) / slots;
  return {double(waves) * double(rows), splits > 1 ? 1 : 0};
}

AttentionGridPoints attention_grid_points(const AttentionGridPlan& plan, const std::vector<int>& extra_batches,
                                          const std::vector<int>& extra_q_lens) {
  AttentionGridPoints out;
  auto& dec = out.decode;
  auto& pre = out.prefill;
  std::vector<int> batches = plan.batches;
  for (int b : extra_batches)
    if (std::find(batches.begin(), batches.end(), b) == batches.end()) batches.push_back(b);
  for (int b : batches)
    for (int c : plan.contexts)
      if (int64_t(b) * c <= plan.max_tokens) dec.emplace_back(b, c, false);
  // A held-back batch (q_len) that is a row moves to the nearest one that is none (still unmeasured).
  auto free_near = [](const std::vector<int>& rows, int x) {
    auto is_row = [&](int v) { return std::find(rows.begin(), rows.end(), v) != rows.end(); };
    for (int d = 0; d < 64; ++d) {
      if (!is_row(x + d)) return x + d;
      if (x - d > 0 && !is_row(x - d)) return x - d;
    }
    return 0;
  };
  for (auto [b, c] : plan.held_decode)
    if (const int h = free_near(batches, b); h > 0 && int64_t(h) * c <= plan.max_tokens) dec.emplace_back(h, c, true);
  std::vector<int> q_lens = plan.q_lens;
  for (int L : extra_q_lens)
    if (std::find(q_lens.begin(), q_lens.end(), L) == q_lens.end()) q_lens.push_back(L);
  for (int L : q_lens) {
    pre.emplace_back(L, L, false);
    for (int c : plan.contexts)
      if (c > L) pre.emplace_back(L, c, false);
  }
  for (auto [L, c] : plan.held_prefill)
    if (const int h = free_near(q_lens, L); h > 0 && c >= h) pre.emplace_back(h, c, true);
  std::sort(dec.begin(), dec.end());
  std::sort(pre.begin(), pre.end());
  return out;
}

}  // namespace peerplan
