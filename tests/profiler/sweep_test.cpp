#include <gtest/gtest.h>

#include <algorithm>

#include "planner/core/error.hpp"
#include "planner/model/routing_model.hpp"
#include "profiler/common/sweep.hpp"

using namespace peerplan;
using namespace peerplan::profiler;

TEST(Sweep, DefaultSizesAreLogSpaced4KiBTo1GiB) {
  auto s = log_sizes(4 << 10, int64_t(1) << 30);
  ASSERT_EQ(s.size(), 19u) << "4 KiB .. 1 GiB doubling is 2^12 .. 2^30: 19 sizes";
  EXPECT_EQ(s.front(), 4096);
  EXPECT_EQ(s.back(), int64_t(1) << 30);
  for (size_t i = 1; i < s.size(); ++i) EXPECT_EQ(s[i], 2 * s[i - 1]);
}

TEST(Sweep, MaxIsAlwaysIncludedAndSizesAreWordMultiples) {
  auto s = log_sizes(4096, 10000);  // 4096, 8192, then 10000 (not a power of two) as the last point
  ASSERT_EQ(s.size(), 3u);
  EXPECT_EQ(s.back(), 10000);
  for (auto v : log_sizes(6, 1000, 1.5)) EXPECT_EQ(v % 4, 0) << v << ": kernels move 4-byte words";
  EXPECT_EQ(log_sizes(4096, 4096), std::vector<int64_t>{4096});
}

TEST(Sweep, BadRangesAreInputErrors) {
  EXPECT_THROW(log_sizes(8192, 4096), InputError);
  EXPECT_THROW(log_sizes(0, 4096), InputError);
}

TEST(Sweep, ParseSizeUnderstandsBinaryUnits) {
  EXPECT_EQ(parse_size("4096", "--x"), 4096);
  EXPECT_EQ(parse_size("4K", "--x"), 4096);
  EXPECT_EQ(parse_size("4kib", "--x"), 4096);
  EXPECT_EQ(parse_size("64MiB", "--x"), int64_t(64) << 20);
  EXPECT_EQ(parse_size("2G", "--x"), int64_t(2) << 30);
  try {
    parse_size("12 parsecs", "--max-size");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_EQ(e.field(), "--max-size");
  }
  EXPECT_THROW(parse_size("G", "--x"), InputError);
  EXPECT_THROW(parse_size("0", "--x"), InputError);
}

TEST(Sweep, FormatSize) {
  EXPECT_EQ(format_size(4096), "4 KiB");
  EXPECT_EQ(format_size(int64_t(1) << 30), "1 GiB");
  EXPECT_EQ(format_size(100), "100 B");
}

TEST(Sweep, TokenCountsArePowersOfTwoUpToMax) {
  auto t = token_counts(8192);
  ASSERT_EQ(t.size(), 14u);  // 1, 2, ..., 8192
  EXPECT_EQ(t.front(), 1);
  EXPECT_EQ(t.back(), 8192);
  EXPECT_EQ(token_counts(100).back(), 100) << "a non-power max is still measured";
}

TEST(Sweep, FullPlanKeepsAtLeast20SamplesAndCollectivesTo2GiB) {
  ProfileOptions o;
  auto p = plan_sweep(o);
  EXPECT_GE(p.samples, 20);
  EXPECT_EQ(p.collective_sizes.back(), int64_t(2) << 30) << "the nccl-tests targets are at 2 GiB";
  EXPECT_EQ(p.transfer_sizes.size(), 19u);
  EXPECT_EQ(p.tokens.back(), 8192);
}

TEST(Sweep, QuickPlanIsSmallButKeepsTheEnds) {
  ProfileOptions o;
  o.quick = true;
  auto p = plan_sweep(o);
  EXPECT_EQ(p.transfer_sizes.size(), 5u);
  EXPECT_EQ(p.transfer_sizes.front(), 4096);
  EXPECT_EQ(p.transfer_sizes.back(), int64_t(1) << 30);
  EXPECT_LE(p.samples, 5);
  EXPECT_LE(p.tokens.back(), 256);
  EXPECT_LE(p.collective_sizes.back(), int64_t(64) << 20);
}

TEST(Sweep, BadOptionsNameTheOption) {
  ProfileOptions o;
  o.samples = 0;
  try {
    plan_sweep(o);
    FAIL();
  } catch (const InputError& e) {
    EXPECT_EQ(e.field(), "--samples");
  }
}

TEST(Sweep, DutyIsAShareOfTimeAndTheIdleFollowsIt) {
  ProfileOptions o;
  EXPECT_DOUBLE_EQ(plan_sweep(o).duty, 1.0) << "back to back unless asked";
  o.duty = 0.5;
  EXPECT_DOUBLE_EQ(plan_sweep(o).duty, 0.5);
  for (double bad : {0.0, -0.5, 1.5}) {
    o.duty = bad;
    try {
      plan_sweep(o);
      FAIL() << bad;
    } catch (const InputError& e) {
      EXPECT_EQ(e.field(), "--duty");
    }
  }
  EXPECT_DOUBLE_EQ(compute_idle_s(200e-6, 1.0), 0.0);
  EXPECT_NEAR(compute_idle_s(200e-6, 0.5), 200e-6, 1e-12) << "half the time idle: as long as the region";
  EXPECT_NEAR(compute_idle_s(200e-6, 0.25), 600e-6, 1e-12);
  EXPECT_DOUBLE_EQ(compute_idle_s(0.2, 0.25), 0.05) << "capped: a long region needs no longer rest";
}

TEST(Sweep, RepsCoverTheTargetDurationForSmallCopies) {
  // 4 KiB at 400 GB/s is ~10 ns: the cap (64) applies. 1 GiB takes 2.7 ms: one copy per region.
  EXPECT_EQ(reps_for(4096, 400, 200e-6, 64), 64);
  EXPECT_EQ(reps_for(int64_t(1) << 30, 400), 1);
  // 8 MiB at 400 GB/s is 21 us: 10 copies fill 200 us.
  EXPECT_EQ(reps_for(8 << 20, 400, 200e-6, 64), 10);
}

namespace peerplan::profiler {
namespace {
// The grouped rows add the midpoints of the eager (cuBLAS) range only: 384 .. 6144 between 256 .. 8192; the
// graph range keeps its powers of two, and a max that is not a power of two gets no midpoint past it.
TEST(Sweep, GroupedTokenCountsAddEagerMidpoints) {
  EXPECT_EQ(grouped_token_counts(token_counts(8192)),
            (std::vector<int64_t>{1, 2, 4, 8, 16, 32, 64, 128, 256, 384, 512, 768, 1024, 1536, 2048, 3072, 4096, 6144,
                                  8192}));
  EXPECT_EQ(grouped_token_counts(token_counts(256)), token_counts(256));
  EXPECT_EQ(grouped_token_counts(token_counts(2515)),
            (std::vector<int64_t>{1, 2, 4, 8, 16, 32, 64, 128, 256, 384, 512, 768, 1024, 1536, 2048, 2515}));
  EXPECT_EQ(grouped_token_counts({}), std::vector<int64_t>{});
}

// Inside a step where cuBLASLt changed kernels, every 4 rows; nowhere else, however the curve bends.
TEST(Sweep, ExpertRowsRefineOnlyTheStepsWhereTheKernelChanged) {
  // Mixtral int8 gate_up's shape (session 25 Q): 0.30 us a row up to 512, then another kernel from 20 us
  // at 0.27 a row (a drop), and past 1024 a third at +150 us (a jump); 1 % noise on alternate points.
  auto t = [](int64_t r) {
    double s = r <= 512 ? 60e-6 + 0.30e-6 * r : 20e-6 + 0.27e-6 * r;
    if (r > 1024) s += 150e-6;
    return s * (r % 64 == 0 ? 1.01 : 1.0);
  };
  std::vector<std::pair<int64_t, double>> timed;
  for (int64_t r = 32; r <= 1536; r += 32) timed.push_back({r, t(r)});
  const std::vector<int64_t> fine = refine_expert_rows(timed);
  std::vector<int64_t> want;
  for (int64_t r = 516; r < 544; r += 4) want.push_back(r);
  for (int64_t r = 1028; r < 1056; r += 4) want.push_back(r);
  EXPECT_EQ(fine, want);
  // A smooth curve (weight-bound, then compute-bound: a knee, no step) is not refined.
  std::vector<std::pair<int64_t, double>> smooth;
  for (int64_t r = 32; r <= 1536; r += 32) smooth.push_back({r, std::max(100e-6, 0.3e-6 * double(r))});
  EXPECT_TRUE(refine_expert_rows(smooth).empty());
  // At most max_steps steps, the largest first; too few points, nothing.
  EXPECT_EQ(refine_expert_rows(timed, 4, 1), std::vector<int64_t>(want.begin() + 7, want.end()));
  EXPECT_TRUE(refine_expert_rows({{32, 1e-4}, {64, 5e-5}}).empty());
}
}  // namespace
}  // namespace peerplan::profiler

namespace peerplan::profiler {
namespace {
// The busiest expert's rows of a routing the compiler counts (uniform, default seed), for the tests below.
int64_t busiest(int64_t experts, int64_t topk, int64_t tokens, int layer) {
  return routing::group_load(routing::expert_counts(routing::RoutingSpec{}, experts, topk, tokens, layer), 0, experts)
      .max_rows;
}

// One expert's cuBLAS rows (expert_gemms): steps of 32 from 32 to the busiest expert of any eager call
// at any of the first 64 layers, rounded up to 32; Mixtral-8x7B (8 experts, top-2) at the default sweep.
TEST(Sweep, ExpertRowsStepBy32UpToTheBusiestEagerExpert) {
  const std::vector<int64_t> tokens = grouped_token_counts(token_counts(8192));
  const std::vector<int64_t> rows = expert_gemm_rows(tokens, 2, 8);
  ASSERT_FALSE(rows.empty());
  EXPECT_EQ(rows.front(), 32);
  for (size_t i = 1; i < rows.size(); ++i) EXPECT_EQ(rows[i], rows[i - 1] + 32) << "steps of 32, at " << i;
  int64_t most = 0;
  for (int layer = 0; layer < kExpertRowsLayers; ++layer) most = std::max(most, busiest(8, 2, 8192, layer));
  EXPECT_GE(rows.back(), most) << "every served layer's busiest expert at 8192 tokens lies on the grid";
  EXPECT_LT(rows.back(), most + 32) << "and the grid stops at the first multiple of 32 past it";
  EXPECT_GT(most, 8192 * 2 / 8) << "the busiest expert holds more than the mean 2048 rows";
  EXPECT_LT(rows.back(), int64_t(1.35 * 2048)) << "well inside the 1.35x mean bound";
  // Both of cuBLASLt's Mixtral steps (512 and 1024 rows an expert) have points on both sides.
  for (int64_t r : {480, 512, 544, 992, 1024, 1056})
    EXPECT_TRUE(std::find(rows.begin(), rows.end(), r) != rows.end()) << r;
}

TEST(Sweep, ExpertRowsNeedAnEagerTokenCount) {
  EXPECT_TRUE(expert_gemm_rows(grouped_token_counts(token_counts(256)), 2, 8).empty())
      << "decode graphs (<= 256 tokens) never take the cuBLAS path";
  EXPECT_TRUE(expert_gemm_rows({}, 2, 8).empty());
  // One eager count: only its routing bounds the grid (257 tokens, top-2 of 8: ~64 rows an expert).
  const std::vector<int64_t> one = expert_gemm_rows({1, 256, 257}, 2, 8);
  int64_t most = 0;
  for (int layer = 0; layer < kExpertRowsLayers; ++layer) most = std::max(most, busiest(8, 2, 257, layer));
  ASSERT_FALSE(one.empty());
  EXPECT_EQ(one.back(), (most + 31) / 32 * 32);
}

TEST(Sweep, ExpertRowsAreCappedAtTheTokens) {
  // Every token to every expert (top-8 of 8): each expert holds all 300 rows; 320 would be more rows
  // than tokens, so the last point is 300 itself.
  const std::vector<int64_t> rows = expert_gemm_rows({300}, 8, 8);
  ASSERT_EQ(rows.size(), 10u);
  EXPECT_EQ(rows[8], 288);
  EXPECT_EQ(rows.back(), 300);
  EXPECT_THROW(expert_gemm_rows({300}, 3, 2), InputError) << "top-k above the experts";
  EXPECT_THROW(expert_gemm_rows({300}, 0, 8), InputError);
}
}  // namespace
}  // namespace peerplan::profiler
