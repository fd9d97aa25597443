#include <gtest/gtest.h>

#include "planner/core/error.hpp"
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
}  // namespace
}  // namespace peerplan::profiler
