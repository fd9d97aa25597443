// The 2-D attention grid (planner/cost/attention_grid.hpp): synthetic grids of a kernel with a
// launch floor and an efficiency that grows with the tile count, priced at measured, held-back,
// between-row and beyond-range points.
#include <algorithm>
#include <cmath>
#include <set>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>

#include "planner/core/error.hpp"

#include "planner/cost/attention_grid.hpp"

using namespace peerplan;

namespace {

// A plausible prefill kernel: 8 us floor, 600 TFLOP/s at large q, less with few query tiles.
double prefill_time(int64_t batch, int64_t q, int64_t c) {
  AttentionShape s;
  s.prefill = true, s.batch = batch, s.q_len = q, s.context = c;
  const double flops = 4.0 * 32 * 128 * attention_work(s);
  const double eff = 600e12 * (1.0 - 0.6 / std::sqrt(double(q) / 64.0 + 1.0));
  return 8e-6 + flops / eff;
}

// Decode: 6 us floor, HBM 4 TB/s reached at large batch x context.
double decode_time(int64_t b, int64_t c) {
  const double bytes = double(b) * double(c) * 8 * 128 * 2 * 2;
  const double bw = 4e12 * (1.0 - 0.7 / std::sqrt(double(b) * double(c) / 4096.0 + 1.0));
  return 6e-6 + bytes / bw;
}

AttentionTime point(const char* phase, int64_t b, int64_t q, int64_t c, double t) {
  AttentionTime a;
  a.phase = phase;
  a.batch = b, a.q_len = q, a.context = c;
  a.heads = 32, a.kv_heads = 8, a.head_dim = 128;
  a.time.median = t;
  return a;
}

std::vector<AttentionTime> prefill_grid() {
  std::vector<AttentionTime> t;
  // 2x spacing, as profiler/measure/attention.cpp times (4x cells leave up to ~11 % at the launch
  // floor's edge on this kernel: what the held-back points of a profile would show).
  for (int64_t q : {16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192})
    for (int64_t c : {256, 512, 1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072}) {
      const int64_t cc = std::max(c, q);
      t.push_back(point("prefill", 1, q, cc, prefill_time(1, q, cc)));
    }
  return t;
}

AttentionShape prefill(int64_t b, int64_t q, int64_t c) {
  AttentionShape s;
  s.prefill = true, s.batch = b, s.q_len = q, s.context = c, s.heads = 32, s.kv_heads = 8, s.head_dim = 128;
  return s;
}

}  // namespace

TEST(AttentionGrid, MeasuredPointIsReturnedAsMeasured) {
  auto t = prefill_grid();
  auto p = attention_from_grid(t, 0, prefill(1, 1024, 16384));
  ASSERT_TRUE(p);
  EXPECT_EQ(p->source, CostSource::Measured);
  EXPECT_DOUBLE_EQ(p->seconds, prefill_time(1, 1024, 16384));
}

TEST(AttentionGrid, InterpolatesChunksOverAContextWithin3Percent) {
  auto t = prefill_grid();
  // Geometric midpoints in both axes, as the profiler holds back, and the shapes.
  for (auto [q, c] : std::vector<std::pair<int64_t, int64_t>>{
           {181, 2896}, {724, 11585}, {2896, 46341}, {1024, 17408}, {4096, 40000}, {8192, 24576}, {2048, 3000},
           {512, 100000}, {6000, 70000}}) {
    auto p = attention_from_grid(t, 0, prefill(1, q, c));
    ASSERT_TRUE(p) << q << " " << c;
    EXPECT_EQ(p->source, CostSource::Interpolated) << q << " " << c;
    EXPECT_NEAR(p->seconds / prefill_time(1, q, c), 1.0, 0.03) << "q " << q << " ctx " << c;
  }
}

TEST(AttentionGrid, UpperRowStartingAboveTheContextIsNotExtrapolation) {
  // q = 3000 over 3000: the 4096 row starts at context 4096; the 1024 row covers 3000.
  auto t = prefill_grid();
  auto p = attention_from_grid(t, 0, prefill(1, 3000, 3000));
  ASSERT_TRUE(p);
  EXPECT_EQ(p->source, CostSource::Interpolated);
  EXPECT_NEAR(p->seconds / prefill_time(1, 3000, 3000), 1.0, 0.05);
}

TEST(AttentionGrid, BeyondTheMeasuredMaximumIsMarkedExtrapolated) {
  auto t = prefill_grid();
  auto p = attention_from_grid(t, 0, prefill(1, 2048, 262144));
  ASSERT_TRUE(p);
  EXPECT_EQ(p->source, CostSource::Extrapolated);
  // Edge efficiency: the time grows with the work (within the synthetic kernel's own drift).
  EXPECT_NEAR(p->seconds / prefill_time(1, 2048, 262144), 1.0, 0.05);
  auto q = attention_from_grid(t, 0, prefill(1, 16384, 16384));
  ASSERT_TRUE(q);
  EXPECT_EQ(q->source, CostSource::Extrapolated) << "q_len beyond the largest row";
}

TEST(AttentionGrid, SeveralSequencesWithoutTheirOwnPointsArePricedPerSequence) {
  auto t = prefill_grid();
  auto one = attention_from_grid(t, 0, prefill(1, 1024, 4096));
  auto three = attention_from_grid(t, 0, prefill(3, 1024, 4096));
  ASSERT_TRUE(one && three);
  EXPECT_DOUBLE_EQ(three->seconds, 3 * one->seconds);
  EXPECT_EQ(three->source, CostSource::Interpolated) << "not a measured point of batch 3";
  t.push_back(point("prefill", 3, 1024, 4096, 1e-3));
  auto own = attention_from_grid(t, 0, prefill(3, 1024, 4096));
  ASSERT_TRUE(own);
  EXPECT_EQ(own->source, CostSource::Measured);
  EXPECT_DOUBLE_EQ(own->seconds, 1e-3);
}

TEST(AttentionGrid, DecodeInterpolatesOverBatchAndContext) {
  std::vector<AttentionTime> t;
  for (int64_t b : {1, 2, 4, 8, 16, 32, 64, 128, 256})
    for (int64_t c : {256, 512, 1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072})
      if (b * c <= (int64_t(1) << 22)) t.push_back(point("decode", b, 1, c, decode_time(b, c)));
  AttentionShape s;
  s.heads = 32, s.kv_heads = 8, s.head_dim = 128, s.q_len = 1;
  for (auto [b, c] : std::vector<std::pair<int64_t, int64_t>>{{3, 2896}, {11, 23170}, {45, 5793}, {181, 724}, {1, 100000}}) {
    s.batch = b, s.context = c;
    auto p = attention_from_grid(t, 0, s);
    ASSERT_TRUE(p);
    EXPECT_EQ(p->source, CostSource::Interpolated) << b << " " << c;
    EXPECT_NEAR(p->seconds / decode_time(b, c), 1.0, 0.03) << "batch " << b << " ctx " << c;
  }
  s.head_dim = 64;
  EXPECT_FALSE(attention_from_grid(t, 0, s)) << "another head shape is another kernel";
}

TEST(AttentionGrid, HoldoutPricesEachHeldPointWithoutAnyOfThem) {
  auto t = prefill_grid();
  const size_t base = t.size();
  t.push_back(point("prefill", 1, 724, 11585, prefill_time(1, 724, 11585)));
  t.push_back(point("prefill", 1, 2896, 46341, prefill_time(1, 2896, 46341) * 1.10));  // a 10 % outlier
  auto err = attention_grid_holdout(t, {base, base + 1});
  ASSERT_EQ(err.size(), 2u);
  EXPECT_LT(std::abs(err[0]), 0.03);
  EXPECT_NEAR(err[1], 1.0 / 1.10 - 1.0, 0.03) << "the held point's own deviation shows";
  std::vector<AttentionTime> lone{point("prefill", 1, 512, 512, 1e-5)};
  auto none = attention_grid_holdout(lone, {0});
  ASSERT_EQ(none.size(), 1u);
  EXPECT_TRUE(std::isnan(none[0])) << "nothing left to price it from";
}

TEST(AttentionGrid, WholePromptBetweenRowsReadsTheLowerRowAtItsContextAndTheUpperAtItsEdge) {
  // Rows 128 and 256; a whole prompt of 181 (context = q_len). The 256 row does not reach down to
  // 181: the lower row is read at 181 (log context), the upper row's edge (256 at 256) stands in,
  // blended in log q; not extrapolated (the lower row covers 181). Reading both rows at their own
  // diagonals (12.64 us here) fitted the study grid better but moved real runs away (attention_grid.cpp).
  std::vector<AttentionTime> t;
  for (auto [q, c, us] : std::vector<std::tuple<int64_t, int64_t, double>>{
           {128, 128, 10.0}, {128, 256, 14.0}, {128, 512, 22.0}, {256, 256, 16.0}, {256, 512, 27.0}})
    t.push_back(point("prefill", 1, q, c, us * 1e-6));
  auto eff = [&](int64_t q, int64_t c, double us) { return std::log(us * 1e-6 / attention_work(prefill(1, q, c))); };
  const double f = std::log(181.0 / 128.0) / std::log(2.0);
  const double h = std::log(181.0 / 128.0) / std::log(2.0);  // 181 between contexts 128 and 256 of row 128
  const double lo = eff(128, 128, 10.0) + h * (eff(128, 256, 14.0) - eff(128, 128, 10.0));
  const double le = lo + f * (eff(256, 256, 16.0) - lo);
  auto p = attention_from_grid(t, 0, prefill(1, 181, 181));
  ASSERT_TRUE(p);
  EXPECT_EQ(p->source, CostSource::Interpolated);
  EXPECT_NEAR(p->seconds, std::exp(le) * attention_work(prefill(1, 181, 181)), 1e-12);
  EXPECT_NEAR(p->seconds * 1e6, 10.46, 0.01);
  // A chunk of 181 over 362: the 256 row reaches 362, so both rows are read at 362 (log context).
  const double g = std::log(362.0 / 256.0) / std::log(2.0);
  const double lo2 = eff(128, 256, 14.0) + g * (eff(128, 512, 22.0) - eff(128, 256, 14.0));
  const double hi2 = eff(256, 256, 16.0) + g * (eff(256, 512, 27.0) - eff(256, 256, 16.0));
  const double le2 = lo2 + f * (hi2 - lo2);
  auto p2 = attention_from_grid(t, 0, prefill(1, 181, 362));
  ASSERT_TRUE(p2);
  EXPECT_NEAR(p2->seconds, std::exp(le2) * attention_work(prefill(1, 181, 362)), 1e-12);
  // Where the upper row reaches the context, both are read at it (256 < 512: the 256 row's 512 point).
  const double le3 = eff(128, 512, 22.0) + f * (eff(256, 512, 27.0) - eff(128, 512, 22.0));
  auto p3 = attention_from_grid(t, 0, prefill(1, 181, 512));
  ASSERT_TRUE(p3);
  EXPECT_NEAR(p3->seconds, std::exp(le3) * attention_work(prefill(1, 181, 512)), 1e-12);
}

TEST(AttentionGridPlan, DefaultGridIsQuarterOctaveWhereTheStudyNeededIt) {
  const AttentionGridPlan g = attention_grid_plan(false, 131072);
  // Contexts: quarter-octave 256 .. 4096, half-octave beyond.
  ASSERT_EQ(g.contexts.size(), 27u);
  EXPECT_EQ(std::vector<int>(g.contexts.begin(), g.contexts.begin() + 5), (std::vector<int>{256, 304, 362, 431, 512}));
  EXPECT_EQ(g.contexts[16], 4096);
  EXPECT_EQ(g.contexts[17], 5793);
  EXPECT_EQ(g.contexts.back(), 131072);
  // q_lens: half-octave to 128, quarter-octave from it, and both sides of every tile boundary to 2048
  // (27 rows more than the 31 quarter-octave ones: 128, 256, 512, 1024 and 2048 were rows already).
  ASSERT_EQ(g.q_lens.size(), 58u);
  EXPECT_EQ(std::vector<int>(g.q_lens.begin(), g.q_lens.begin() + 10),
            (std::vector<int>{16, 23, 32, 45, 64, 91, 128, 129, 152, 181}));
  EXPECT_EQ(g.q_lens.back(), 8192);
  // Decode: every batch to 16, then multiples of 8 to 256.
  ASSERT_EQ(g.batches.size(), 46u);
  EXPECT_EQ(g.batches[15], 16);
  EXPECT_EQ(g.batches[16], 24);
  EXPECT_EQ(g.batches.back(), 256);
  EXPECT_EQ(g.held_prefill.size(), 69u);
  EXPECT_EQ(g.held_decode.size(), 23u);
  EXPECT_EQ(g.held_prefill.front(), (std::pair<int, int>{27, 332}));  // sqrt(23 x 32), sqrt(304 x 362)
  // A shorter maximum context ends the grid there.
  const AttentionGridPlan s = attention_grid_plan(false, 32768);
  EXPECT_EQ(s.contexts.back(), 32768);
  EXPECT_EQ(s.contexts[s.contexts.size() - 2], 23170);
  // The study grid: quarter-octave throughout, nothing held back.
  const AttentionGridPlan st = attention_grid_plan(false, 131072, AttentionGridMode::Study);
  EXPECT_EQ(st.contexts.size(), 37u);
  EXPECT_EQ(st.q_lens.size(), 37u);
  EXPECT_TRUE(st.held_prefill.empty() && st.held_decode.empty());
  // The fine prefill study: every 8 tokens to 1024, every 32 to 2048, contexts within the maximum.
  const AttentionGridPlan fp = attention_grid_plan(false, 4096, AttentionGridMode::FinePrefill);
  EXPECT_EQ(fp.q_lens.size(), 128u + 32u);  // 8..1024 by 8, 1056..2048 by 32
  EXPECT_EQ(fp.q_lens[0], 8);
  EXPECT_EQ(fp.q_lens[127], 1024);
  EXPECT_EQ(fp.q_lens.back(), 2048);
  EXPECT_EQ(fp.contexts, (std::vector<int>{512, 558, 609, 724, 1024, 1579, 4096}));
  EXPECT_EQ(fp.batches, (std::vector<int>{1}));
  EXPECT_TRUE(fp.held_prefill.empty() && fp.held_decode.empty());
  EXPECT_EQ(attention_grid_mode(nullptr), AttentionGridMode::Default);
  EXPECT_EQ(attention_grid_mode(""), AttentionGridMode::Default);
  EXPECT_EQ(attention_grid_mode("fine-prefill"), AttentionGridMode::FinePrefill);
  // Past the tile rows: 48 tiles (17..64) x 3 q_lens, both sides of every boundary from 2048 to 8192.
  const AttentionGridPlan fl = attention_grid_plan(false, 131072, AttentionGridMode::FinePrefillLong);
  EXPECT_EQ(fl.q_lens.size(), 48u * 3u);
  EXPECT_EQ(fl.q_lens.front(), 2049);
  EXPECT_EQ(fl.q_lens[1], 2112);
  EXPECT_EQ(fl.q_lens[2], 2176);
  EXPECT_EQ(fl.q_lens.back(), 8192);
  EXPECT_TRUE(std::is_sorted(fl.q_lens.begin(), fl.q_lens.end()));
  EXPECT_EQ(fl.contexts, (std::vector<int>{8192, 16384}));
  EXPECT_TRUE(fl.held_prefill.empty() && fl.held_decode.empty());
  EXPECT_EQ(attention_grid_mode("fine-prefill-long"), AttentionGridMode::FinePrefillLong);
  EXPECT_THROW(attention_grid_mode("fine"), InputError);
  EXPECT_EQ(attention_grid_plan(true, 131072).batches, (std::vector<int>{1, 32}));
}

TEST(AttentionGridPlan, HeldBackPointsAreNoGridPoints) {
  const AttentionGridPlan g = attention_grid_plan(false, 131072);
  const std::vector<int> waves = attention_wave_rows(32, 132, g.q_lens.back());
  const std::vector<int> steps = attention_launch_step_rows(g, [](int b, int c) { return mla_decode_launch_span(b, 16, c, 132); });
  const AttentionGridPoints p = attention_grid_points(g, steps, waves);
  std::set<std::pair<int, int>> grid_dec, grid_pre;
  std::set<int> dec_rows, pre_rows;
  int held_dec = 0, held_pre = 0;
  for (auto [b, c, h] : p.decode)
    if (!h) grid_dec.insert({b, c}), dec_rows.insert(b);
  for (auto [q, c, h] : p.prefill)
    if (!h) grid_pre.insert({q, c}), pre_rows.insert(q);
  for (auto [b, c, h] : p.decode)
    if (h) {
      ++held_dec;
      EXPECT_FALSE(dec_rows.count(b)) << "held-back batch " << b << " is a row";
      EXPECT_EQ(std::count(g.contexts.begin(), g.contexts.end(), c), 0) << c;
      EXPECT_LE(int64_t(b) * c, g.max_tokens);
    }
  for (auto [q, c, h] : p.prefill)
    if (h) {
      ++held_pre;
      EXPECT_FALSE(pre_rows.count(q)) << "held-back q_len " << q << " is a row";
      EXPECT_GE(c, q);
    }
  EXPECT_EQ(held_dec, 23);
  EXPECT_EQ(held_pre, 69);
  // Batch 20 is an MLA step row (17-23): its held points move to the nearest batch that is none.
  EXPECT_TRUE(dec_rows.count(20));
  EXPECT_TRUE(std::count(p.decode.begin(), p.decode.end(), std::tuple<int, int, bool>{28, 332, true}));
  EXPECT_EQ(p.decode.size(), 1681u);
  EXPECT_EQ(p.prefill.size(), 1342u);  // 58 rows (31 quarter-octave, 27 tile) + the 8 wave rows past 2049, 69 held back
}

TEST(AttentionGridPlan, WaveRowsAtTheFirstEightBoundaries) {
  EXPECT_EQ(attention_wave_rows(32, 132, 8192), (std::vector<int>{512, 513, 1024, 1025, 1536, 1537, 2048, 2049, 2560,
                                                                  2561, 3072, 3073, 3584, 3585, 4224, 4225}));
  EXPECT_EQ(attention_wave_rows(16, 132, 8192), (std::vector<int>{1024, 1025, 2048, 2049, 3072, 3073, 4224, 4225, 5248,
                                                                  5249, 6272, 6273, 7296, 7297}));
  EXPECT_EQ(attention_wave_rows(16, 132, 2048), (std::vector<int>{1024, 1025}));
  EXPECT_TRUE(attention_wave_rows(16, 0, 8192).empty());
}

TEST(AttentionGridPlan, MlaDecodeRowsAtItsSplitCountSteps) {
  // 16 heads on 132 SMs: 264 resident CTAs, splits = min(264 / batch, context / 128), chunks of 32 rows.
  EXPECT_EQ(mla_decode_launch_span(1, 16, 131072, 132).span, 512.0);  // 264 splits of 496.5 -> 512 rows
  EXPECT_EQ(mla_decode_launch_span(52, 16, 32768, 132).span, 6560.0);  // 5 splits: 6554 -> 6560
  EXPECT_EQ(mla_decode_launch_span(53, 16, 32768, 132).span, 8192.0);  // 4 splits
  EXPECT_EQ(mla_decode_launch_span(132, 16, 8192, 132).regime, 1);   // 2 splits, merged
  EXPECT_EQ(mla_decode_launch_span(133, 16, 8192, 132).regime, 0);   // 1 split: no merge kernel
  EXPECT_EQ(mla_decode_launch_span(4, 16, 256, 132).span, 128.0);     // 2 splits (one per 128 tokens)
  const AttentionGridPlan g = attention_grid_plan(false, 131072);
  const std::vector<int> rows =
      attention_launch_step_rows(g, [](int b, int c) { return mla_decode_launch_span(b, 16, c, 132); });
  EXPECT_EQ(rows, (std::vector<int>{17, 18, 19, 20, 21, 22, 23, 25, 26, 27, 29, 30, 33, 34, 37, 38, 44, 45, 52, 53, 66,
                                    67, 89, 132, 133}));
}
