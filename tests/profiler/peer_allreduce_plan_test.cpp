// CPU side of the peer-memory all-reduce measurement (profiler/common/peer_allreduce_plan.hpp).
#include "profiler/common/peer_allreduce_plan.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <set>

using namespace peerplan;
using namespace peerplan::profiler;

TEST(PeerAllReducePlan, SizesSpan4KiBTo64MiBInWholeVectorsPerShare) {
  auto s = peer_allreduce_sizes(4, int64_t(1) << 40, 2);
  ASSERT_FALSE(s.empty());
  EXPECT_EQ(s.front(), 4096);
  EXPECT_EQ(s.back(), 64ll << 20);
  EXPECT_EQ(s.size(), 15u);  // 4 KiB .. 64 MiB, factor 2
  for (int n : {2, 3, 6, 8})
    for (int64_t b : peer_allreduce_sizes(1, int64_t(1) << 40, n)) EXPECT_EQ(b % (16 * n), 0) << b << " over " << n;
  EXPECT_EQ(peer_allreduce_sizes(1 << 20, 4 << 20, 2), (std::vector<int64_t>{1 << 20, 2 << 20, 4 << 20}))
      << "the sweep's own bounds clip it";
}

TEST(PeerAllReducePlan, GroupsNeedP2pBetweenEveryPairAndAtMost8Gpus) {
  auto usable = [](int a, int b) { return !((a == 0 && b == 2) || (a == 2 && b == 0)); };
  auto g = peer_allreduce_groups({{0, 1, 2}, {0, 1}, {1, 2}, {0, 2}, {0}}, usable);
  EXPECT_EQ(g, (std::vector<std::vector<int>>{{0, 1}, {1, 2}}));
  std::vector<int> nine{0, 1, 2, 3, 4, 5, 6, 7, 8};
  EXPECT_TRUE(peer_allreduce_groups({nine}, [](int, int) { return true; }).empty());
}

TEST(PeerAllReducePlan, BlocksGrowWithTheBufferUpToTheLimit) {
  EXPECT_EQ(peer_allreduce_blocks(16), 1);
  EXPECT_EQ(peer_allreduce_blocks(16 * kPeerArThreads), 1);
  EXPECT_EQ(peer_allreduce_blocks(16 * kPeerArThreads + 16), 2);
  EXPECT_EQ(peer_allreduce_blocks(64ll << 20), kPeerArMaxBlocks);
}

TEST(PeerAllReducePlan, Bf16RoundsToNearestEven) {
  EXPECT_EQ(float_to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(bf16_to_float(float_to_bf16(-64.0f)), -64.0f);
  // 1 + 2^-8 is halfway between 1 and 1 + 2^-7: ties to even (1.0).
  EXPECT_EQ(float_to_bf16(1.0f + 1.0f / 256), 0x3f80);
  EXPECT_EQ(float_to_bf16(1.0f + 3.0f / 256), 0x3f82) << "tie rounds up to the even mantissa";
  EXPECT_TRUE(std::isnan(bf16_to_float(float_to_bf16(std::nanf("")))));
}

TEST(PeerAllReducePlan, InputsAreSmallIntegersSoSumsAreExactAndVerifiable) {
  for (int r = 0; r < 8; ++r)
    for (int64_t i = 0; i < 100; ++i) {
      const float v = peer_allreduce_input(r, i);
      EXPECT_EQ(v, std::round(v));
      EXPECT_LE(std::fabs(v), 8.0f);
      EXPECT_EQ(bf16_to_float(float_to_bf16(v)), v);
    }
  std::set<float> distinct;
  for (int64_t i = 0; i < 17; ++i) distinct.insert(peer_allreduce_input(0, i));
  EXPECT_GT(distinct.size(), 10u) << "a pattern, not a constant: a misplaced element shows";
  std::vector<uint16_t> out(1000);
  for (size_t i = 0; i < out.size(); ++i) out[i] = float_to_bf16(peer_allreduce_expected(4, int64_t(i)));
  EXPECT_EQ(peer_allreduce_mismatches(out, 4), 0);
  std::swap(out[10], out[11]);
  EXPECT_EQ(peer_allreduce_mismatches(out, 4), 2) << "two elements swapped";
  EXPECT_GT(peer_allreduce_mismatches(out, 2), 0) << "summed over the wrong group size";
}

TEST(PeerAllReducePlan, CurveIsInTheProfilesFormatAscending) {
  PeerAllReduceCurve c = peer_allreduce_curve(ArImpl::TwoShot, {0, 1}, {{8192, {}}, {4096, {}}});
  EXPECT_EQ(c.algo, "two_shot");
  EXPECT_EQ(c.points.front().bytes, 4096);
  EXPECT_THROW(peer_allreduce_curve(ArImpl::Nccl, {0, 1}, {}), std::invalid_argument);
}
