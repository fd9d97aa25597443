// The prefill wave model (planner/cost/attention_grid.hpp prefill_wave_model) and the pricer's use of it
// between grid points (AttentionShape::sms > 0): known answers of the CTA schedule, and a synthetic
// cuDNN-like kernel whose time steps with its 128-row query tiles and its waves over 132 SMs, priced
// from the default grid's rows (attention_grid_plan + attention_wave_rows) at points between them.
#include <algorithm>
#include <cmath>
#include <vector>

#include <gtest/gtest.h>

#include "planner/cost/attention_grid.hpp"

using namespace peerplan;

namespace {

constexpr int kSms = 132;

TEST(PrefillWaveModel, KnownSchedules) {
  // 32 heads x 4 tiles = 128 CTAs <= 132 SMs: one wave, the last tile sees all 4096 keys (32 blocks) + 8.
  EXPECT_DOUBLE_EQ(prefill_wave_model(1, 512, 4096, 32, kSms), 40.0);
  EXPECT_DOUBLE_EQ(prefill_wave_model(1, 8, 4096, 32, kSms), 40.0) << "a partial tile costs a whole one";
  // 513 tokens: 160 CTAs (tiles of 29, 30, 31, 32, 32 blocks); the 28 left over go to the SMs that
  // finish first: 27 of 29 blocks and one of 30, the last CTA (32) there: 62 + 8.
  EXPECT_DOUBLE_EQ(prefill_wave_model(1, 513, 4096, 32, kSms), 70.0);
  // 16 heads x 9 tiles = 144 CTAs over 16384 keys: 121-128 blocks; 12 tile-8 CTAs after tile 0's 121.
  EXPECT_DOUBLE_EQ(prefill_wave_model(1, 1025, 16384, 16, kSms), 257.0);
  // Two sequences of 300 whole-prompt tokens at 64 heads: 384 CTAs of 1, 2, 3 blocks.
  EXPECT_DOUBLE_EQ(prefill_wave_model(2, 300, 300, 64, kSms), 16.0);
  // Many waves (4096 CTAs, 31 waves): the total work over the SMs, plus at most one CTA (1024 blocks).
  const double m = prefill_wave_model(1, 8192, 131072, 64, kSms);
  const double total = 64.0 * 64 * (131072.0 - 8192 + 128 * 32.5) / 128;  // sum over the 64 tiles
  EXPECT_GE(m - 8, total / kSms);
  EXPECT_LE(m - 8, total / kSms + 1024);
  // Beyond 65536 CTAs the fluid limit, continuous with the schedule.
  const double exact = prefill_wave_model(1, 131072, 131072, 64, kSms);  // 65536 CTAs: scheduled
  const double fluid = prefill_wave_model(1, 131072 + 128, 131072 + 128, 64, kSms);
  EXPECT_NEAR(fluid / exact, 1.0, 0.01);
}

// A cuDNN-like kernel: 1.9 us per KV block of the makespan, 16 us fixed, and +1.5 % per query tile
// (what the pricer does not model: the fine study's slope within a wave count).
double kernel_s(int64_t q, int64_t c, int64_t heads) {
  const double tiles = std::ceil(double(q) / 128);
  return (16.0 + 1.9 * (prefill_wave_model(1, q, c, heads, kSms) - 8.0)) * (1.0 + 0.015 * tiles) * 1e-6;
}

// Prefill rows of `q_lens` at the diagonal and every default-grid context above it, timed by `kernel`.
std::vector<AttentionTime> grid_timed(const std::vector<int>& q_lens, int64_t heads,
                                      double (*kernel)(int64_t, int64_t, int64_t)) {
  const AttentionGridPlan plan = attention_grid_plan(false, 16384);
  std::vector<AttentionTime> t;
  auto add = [&](int64_t q, int64_t c) {
    AttentionTime a;
    a.phase = "prefill", a.batch = 1, a.q_len = q, a.context = c;
    a.heads = heads, a.kv_heads = 8, a.head_dim = 128;
    a.time.median = kernel(q, c, heads);
    t.push_back(a);
  };
  for (int q : q_lens) {
    add(q, q);
    for (int c : plan.contexts)
      if (c > q) add(q, c);
  }
  return t;
}

std::vector<AttentionTime> default_grid(int64_t heads) {
  std::vector<int> q_lens = attention_grid_plan(false, 16384).q_lens;
  for (int q : attention_wave_rows(int(heads), kSms, 8192)) q_lens.push_back(q);
  return grid_timed(q_lens, heads, kernel_s);
}

AttentionShape shape(int64_t q, int64_t c, int64_t heads, int sms) {
  AttentionShape s;
  s.prefill = true, s.batch = 1, s.q_len = q, s.context = c, s.heads = heads, s.kv_heads = 8, s.head_dim = 128;
  s.sms = sms;
  return s;
}

TEST(PrefillWaveModel, InterpolatesTileStepsBetweenGridRows) {
  for (int64_t heads : {32, 64}) {
    const auto t = default_grid(heads);
    double worst_model = 0, worst_pairs = 0;
    // Between rows and contexts, in both short (one block more) and long contexts, whole prompts too.
    for (int64_t q : {76, 200, 300, 470, 600, 700, 900, 1300, 2000, 3000})
      for (int64_t c : {int64_t(0), int64_t(558), int64_t(1579), int64_t(4871), int64_t(13777)}) {
        const int64_t cc = std::max(c, q);
        const double truth = kernel_s(q, cc, heads);
        auto m = attention_from_grid(t, 0, shape(q, cc, heads, kSms));
        auto p = attention_from_grid(t, 0, shape(q, cc, heads, 0));
        ASSERT_TRUE(m && p);
        EXPECT_EQ(m->source, CostSource::Interpolated);
        worst_model = std::max(worst_model, std::abs(m->seconds / truth - 1));
        worst_pairs = std::max(worst_pairs, std::abs(p->seconds / truth - 1));
      }
    EXPECT_LT(worst_model, 0.02) << heads << " heads";
    EXPECT_GT(worst_pairs, 0.05) << heads << " heads: the attended pairs miss the steps";
  }
}

TEST(PrefillWaveModel, MeasuredPointsDecodeAndUnknownSmsUnchanged) {
  auto t = default_grid(32);
  // A grid point is its measurement, with or without the model.
  auto e = attention_from_grid(t, 0, shape(513, 4096, 32, kSms));
  ASSERT_TRUE(e);
  EXPECT_EQ(e->source, CostSource::Measured);
  EXPECT_DOUBLE_EQ(e->seconds, kernel_s(513, 4096, 32));
  // Decode is not cuDNN's prefill: the SM count changes nothing there.
  AttentionTime d;
  d.phase = "decode", d.batch = 8, d.q_len = 1, d.heads = 32, d.kv_heads = 8, d.head_dim = 128;
  for (int64_t c : {1024, 4096}) {
    d.context = c, d.time.median = 1e-5 * double(c) / 1024;
    t.push_back(d);
  }
  AttentionShape ds = shape(1, 2048, 32, kSms);
  ds.prefill = false, ds.batch = 8;
  auto with = attention_from_grid(t, 0, ds);
  ds.sms = 0;
  auto without = attention_from_grid(t, 0, ds);
  ASSERT_TRUE(with && without);
  EXPECT_DOUBLE_EQ(with->seconds, without->seconds);
  // Beyond the largest row: extrapolated either way.
  auto far = attention_from_grid(t, 0, shape(12000, 16384, 32, kSms));
  ASSERT_TRUE(far);
  EXPECT_EQ(far->source, CostSource::Extrapolated);
}

TEST(PrefillWaveModel, HoldoutWithSms) {
  auto t = default_grid(32);
  const size_t base = t.size();
  for (auto [q, c] : {std::pair<int64_t, int64_t>{470, 558}, {790, 939}, {1328, 13777}}) {
    AttentionTime a = t.front();
    a.q_len = q, a.context = c, a.time.median = kernel_s(q, c, 32);
    t.push_back(a);
  }
  const auto with = attention_grid_holdout(t, {base, base + 1, base + 2}, kSms);
  const auto without = attention_grid_holdout(t, {base, base + 1, base + 2});
  ASSERT_EQ(with.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_LT(std::abs(with[i]), 0.02) << i;
    EXPECT_LE(std::abs(with[i]), std::abs(without[i]) + 1e-9) << i;
  }
}

TEST(PrefillWaveModel, RowsThatDoNotReachTheContextAreNoEdges) {
  // Rows 128 and 256 from their whole-prompt points, and a held-back row 181 measured at 512 only.
  // A whole prompt of 200: the 181 row does not reach down to 200 and has no whole-prompt point, so
  // with the wave model it is skipped (rows 128 and 256, the upper one's edge (256, 256) standing in);
  // the attended-pairs rule (sms 0, the live rule) still takes its edge at 512 (attention_grid.cpp).
  std::vector<AttentionTime> t;
  auto add = [&](int64_t q, int64_t c, double us) {
    AttentionTime a;
    a.phase = "prefill", a.batch = 1, a.q_len = q, a.context = c;
    a.heads = 32, a.kv_heads = 8, a.head_dim = 128;
    a.time.median = us * 1e-6;
    t.push_back(a);
  };
  add(128, 128, 16.8), add(128, 256, 19.1), add(128, 512, 22.7);
  add(256, 256, 19.2), add(256, 512, 23.0);
  add(181, 512, 22.6);
  auto wm = [](int64_t q, int64_t c) { return prefill_wave_model(1, q, c, 32, kSms); };
  const double f = std::log(200.0 / 128.0) / std::log(2.0);
  const double h = std::log(200.0 / 128.0) / std::log(2.0);  // 200 between contexts 128 and 256 of row 128
  const double lo = std::log(16.8 / wm(128, 128)) + h * (std::log(19.1 / wm(128, 256)) - std::log(16.8 / wm(128, 128)));
  const double le = lo + f * (std::log(19.2 / wm(256, 256)) - lo);
  auto m = attention_from_grid(t, 0, shape(200, 200, 32, kSms));
  ASSERT_TRUE(m);
  EXPECT_EQ(m->source, CostSource::Interpolated);
  EXPECT_NEAR(m->seconds * 1e6, std::exp(le) * wm(200, 200), 1e-9);
  EXPECT_NEAR(m->seconds * 1e6, 19.1, 0.1) << "between its neighbours' 18.9 and 19.2, as cuDNN runs it";
  // The attended pairs: the 181 row's (181, 512) point stands in for 200 tokens at 200 (the quirk).
  auto pairs = [](int64_t q, int64_t c) { return attention_work(shape(q, c, 32, 0)); };
  const double g = std::log(200.0 / 181.0) / std::log(256.0 / 181.0);
  const double a = std::log(22.6 / pairs(181, 512));
  const double lp = a + g * (std::log(19.2 / pairs(256, 256)) - a);
  auto p = attention_from_grid(t, 0, shape(200, 200, 32, 0));
  ASSERT_TRUE(p);
  EXPECT_NEAR(p->seconds * 1e6, std::exp(lp) * pairs(200, 200), 1e-9);
  EXPECT_LT(p->seconds * 1e6, 12.0) << "below both neighbours";
  // A chunk the 181 row reaches (200 at 512) is priced between it and the 256 row, with the model too.
  const double l5 = std::log(22.6 / wm(181, 512)) + g * (std::log(23.0 / wm(256, 512)) - std::log(22.6 / wm(181, 512)));
  auto c5 = attention_from_grid(t, 0, shape(200, 512, 32, kSms));
  ASSERT_TRUE(c5);
  EXPECT_NEAR(c5->seconds * 1e6, std::exp(l5) * wm(200, 512), 1e-9);
}

TEST(PrefillWaveModel, HeldBackRowsPriceOnlyTheContextsTheyReach) {
  // The default grid with its held-back points in the table (as a profile has them), timed 30 % off so
  // that their use shows: whole prompts next to a held-back q_len are priced as without them.
  const auto grid = default_grid(32);
  auto with_held = grid;
  const AttentionGridPlan plan = attention_grid_plan(false, 16384);
  for (auto [q, c] : plan.held_prefill) {
    AttentionTime a = grid.front();
    a.q_len = q, a.context = c, a.time.median = 1.3 * kernel_s(q, c, 32);
    with_held.push_back(a);
  }
  for (int64_t q : {160, 170, 200, 280, 300, 480, 800, 1400}) {
    auto a = attention_from_grid(with_held, 0, shape(q, q, 32, kSms));
    auto b = attention_from_grid(grid, 0, shape(q, q, 32, kSms));
    ASSERT_TRUE(a && b);
    EXPECT_DOUBLE_EQ(a->seconds, b->seconds) << q;
    EXPECT_LT(std::abs(b->seconds / kernel_s(q, q, 32) - 1), 0.02) << q;
  }
  // Where a held-back row reaches the context (q 166 is measured at 332), it is a row like any other.
  auto a = attention_from_grid(with_held, 0, shape(170, 332, 32, kSms));
  auto b = attention_from_grid(grid, 0, shape(170, 332, 32, kSms));
  ASSERT_TRUE(a && b);
  EXPECT_GT(a->seconds, 1.1 * b->seconds);
}

// The default grid's tile rows (attention_tile_rows): both sides of every 128-row tile boundary to 16
// tiles, for every head count; the held-back points stay the quarter-octave cells' middles.
TEST(AttentionTileRows, DefaultGridHasBothSidesOfEveryTileBoundaryTo2048) {
  const AttentionGridPlan g = attention_grid_plan(false, 131072);
  auto row = [&](int q) { return std::count(g.q_lens.begin(), g.q_lens.end(), q) == 1; };
  for (int t = 1; t <= kTileRowsTo; ++t) {
    EXPECT_TRUE(row(t * 128)) << t;
    EXPECT_TRUE(row(t * 128 + 1)) << t;
  }
  EXPECT_FALSE(row(17 * 128 + 1)) << "beyond 16 tiles the quarter-octave and wave rows only";
  EXPECT_TRUE(std::is_sorted(g.q_lens.begin(), g.q_lens.end()));
  EXPECT_EQ(g.q_lens.back(), 8192);
  std::vector<int> held_q;
  for (auto [q, c] : g.held_prefill)
    if (held_q.empty() || held_q.back() != q) held_q.push_back(q);
  EXPECT_EQ(held_q, (std::vector<int>{27, 76, 166, 279, 470, 790, 1328, 2233, 3756, 6317}));
  for (int q : held_q) EXPECT_FALSE(row(q)) << q;
  EXPECT_EQ(attention_tile_rows(2), (std::vector<int>{128, 129, 256, 257}));
}

// A cuDNN-like kernel whose time within one wave count jumps when its last wave is nearly full
// (the fine study: 32 heads at 16384, 10-11 tiles 667-678 us, 12 tiles 710-757), which the wave model
// does not count: +8 % once the last wave holds more than 85 % of the SMs.
double fill_kernel_s(int64_t q, int64_t c, int64_t heads) {
  const int64_t ctas = heads * ((q + 127) / 128);
  const int64_t last = ctas - (ctas - 1) / kSms * kSms;  // CTAs in the last wave
  const double jump = double(last) > 0.85 * kSms ? 1.08 : 1.0;
  return (16.0 + 1.9 * (prefill_wave_model(1, q, c, heads, kSms) - 8.0)) * jump * 1e-6;
}

std::vector<AttentionTime> grid_of(const std::vector<int>& q_lens, int64_t heads) {
  return grid_timed(q_lens, heads, fill_kernel_s);
}

TEST(AttentionTileRows, PriceAQLenBetweenRowsOfItsOwnTileCount) {
  const AttentionGridPlan plan = attention_grid_plan(false, 16384);
  std::vector<int> with = plan.q_lens, without;  // the default rows, and the same without the tile rows
  const std::vector<int> tiles = attention_tile_rows(kTileRowsTo);
  for (int q : plan.q_lens)
    if (std::find(tiles.begin(), tiles.end(), q) == tiles.end() || (q % 128 == 0 && (q & (q - 1)) == 0)) without.push_back(q);
  for (int q : attention_wave_rows(32, kSms, 8192)) {
    if (std::find(with.begin(), with.end(), q) == with.end()) with.push_back(q);
    if (std::find(without.begin(), without.end(), q) == without.end()) without.push_back(q);
  }
  std::sort(with.begin(), with.end());
  std::sort(without.begin(), without.end());
  const auto t_with = grid_of(with, 32), t_without = grid_of(without, 32);
  double worst_with = 0, worst_without = 0;
  // The held-back q_lens to 2048 and others between rows, at held-back and whole-prompt contexts.
  for (int64_t q : {166, 279, 470, 790, 1328, 1350, 1390, 1700, 1900})
    for (int64_t c : {int64_t(0), int64_t(1579), int64_t(4871), int64_t(13777)}) {
      const int64_t cc = std::max(c, q);
      const double truth = fill_kernel_s(q, cc, 32);
      auto a = attention_from_grid(t_with, 0, shape(q, cc, 32, kSms));
      auto b = attention_from_grid(t_without, 0, shape(q, cc, 32, kSms));
      ASSERT_TRUE(a && b);
      worst_with = std::max(worst_with, std::abs(a->seconds / truth - 1));
      worst_without = std::max(worst_without, std::abs(b->seconds / truth - 1));
    }
  EXPECT_LT(worst_with, 0.01) << "each q_len priced between rows of its own tile count";
  EXPECT_GT(worst_without, 0.03) << "without the tile rows 1328 (11 tiles) is priced between 10 and 12 tiles";
  // 1328 at 13777 exactly: between the 1281 and 1408 rows (both 11 tiles, 352 CTAs, the same jump).
  auto p = attention_from_grid(t_with, 0, shape(1328, 13777, 32, kSms));
  ASSERT_TRUE(p);
  EXPECT_NEAR(p->seconds / fill_kernel_s(1328, 13777, 32), 1.0, 0.005);
}

}  // namespace
