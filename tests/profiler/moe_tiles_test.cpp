// Tile bookkeeping of the routed-MoE kernels (profiler/common/moe_tiles.hpp): the grouped GEMM's
// grid, sized on the host from the routing's entries alone, must cover every tile the device-side
// routing can list (a CTA past the list exits; a tile past the grid would be silently skipped), and
// the kernel choice follows the busiest expert's rows.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

#include "planner/model/routing.hpp"
#include "planner/model/moe_kernel_class.hpp"
#include "profiler/common/moe_tiles.hpp"

using namespace peerplan;
using namespace peerplan::kernels;

namespace {

// Tiles of height h the route kernel lists for these per-expert counts.
int64_t tiles_of(const std::vector<int>& counts, int h) {
  int64_t n = 0;
  for (int c : counts) n += (c + h - 1) / h;
  return n;
}

TEST(MoeTiles, GridBoundCoversEveryRoutingOfTheEntries) {
  // Routings drawn by route_token (what the kernel runs), over Qwen1.5-MoE / Mixtral / DeepSeek
  // shapes and EP shards, decode to prefill sizes.
  struct Case { int experts, k, first, count; };
  for (const Case c : {Case{60, 4, 0, 60}, Case{8, 2, 0, 8}, Case{64, 6, 16, 16}, Case{60, 4, 45, 15}})
    for (int64_t T : {1, 2, 5, 16, 64, 333, 2048}) {
      std::vector<int> counts(size_t(c.count), 0);
      int64_t local = 0;
      for (int64_t t = 0; t < T; ++t) {
        int ids[16];
        routing::route_token(1, 3, t, c.experts, c.k, nullptr, ids);
        for (int j = 0; j < c.k; ++j)
          if (ids[j] >= c.first && ids[j] < c.first + c.count) ++counts[size_t(ids[j] - c.first)], ++local;
      }
      for (int kind = 0; kind < kMoeTileKinds; ++kind) {
        const int h = moe_tile_rows(kind);
        EXPECT_LE(tiles_of(counts, h), moe_max_tiles(T * c.k, c.count, h))
            << "E=" << c.experts << " local " << c.count << " T=" << T << " tile " << h;
      }
    }
}

TEST(MoeTiles, GridBoundHoldsForTheWorstSpreads) {
  // Adversarial counts: every entry on one expert, spread one per expert, and just over a tile
  // on as many experts as possible.
  for (int h : {16, 32, 64})
    for (int64_t entries : {1, 15, 16, 17, 100, 1000, 65536})
      for (int64_t experts : {1, 8, 60, 256}) {
        std::vector<int> one(size_t(experts), 0), spread(size_t(experts), 0), over(size_t(experts), 0);
        one[0] = int(entries);
        for (int64_t i = 0; i < entries; ++i) ++spread[size_t(i % experts)];
        int64_t left = entries;
        for (auto& c : over) {
          const int64_t take = std::min<int64_t>(left, h + 1);
          c = int(take), left -= take;
        }
        over[0] += int(left);
        for (const auto* v : {&one, &spread, &over})
          EXPECT_LE(tiles_of(*v, h), moe_max_tiles(entries, experts, h)) << entries << " over " << experts;
      }
}

TEST(MoeTiles, KernelFollowsTheBusiestExpert) {
  EXPECT_EQ(moe_gemm_tile_kind(1), 0);    // batch 1: one row per touched expert
  EXPECT_EQ(moe_gemm_tile_kind(1, true), 0);
  EXPECT_EQ(moe_gemm_tile_kind(16), 0);   // down, decode: one 16-row tile per expert
  EXPECT_EQ(moe_gemm_tile_kind(2, true), 1);  // gate_up (gathered), decode: 32-row tiles
  EXPECT_EQ(moe_gemm_tile_kind(16, true), 1);
  EXPECT_EQ(moe_gemm_tile_kind(17), 1);
  EXPECT_EQ(moe_gemm_tile_kind(32), 1);
  EXPECT_EQ(moe_gemm_tile_kind(33), 2);   // prefill-sized groups: the shared-memory tiled kernel
  EXPECT_EQ(moe_gemm_tile_kind(33, true), 2);
  EXPECT_EQ(moe_gemm_tile_kind(0), 2);    // unknown: the kernel that is right for any size
  for (int kind = 0; kind < kMoeTileKinds; ++kind) EXPECT_EQ(moe_tile_rows(kind), 16 << kind);
}

TEST(MoeTiles, StreamKernelSplitsKWhenTheTouchedRowsGiveTooFewWarps) {
  // Mixtral at batch 1: 2 experts; down (n 4096) has 512 row groups: split; gate_up (n 28672)
  // 3584: enough warps without. Batch 8 (8 experts): down has 2048, no split.
  EXPECT_TRUE(moe_stream_split(4096, 2));
  EXPECT_FALSE(moe_stream_split(28672, 2));
  EXPECT_FALSE(moe_stream_split(4096, 8));
  EXPECT_TRUE(moe_stream_split(2048, 4));   // Qwen1.5-MoE down at batch 1 (512)
  EXPECT_TRUE(moe_stream_split(2816, 4));   // Qwen gate_up at batch 1 (704)
  EXPECT_FALSE(moe_stream_split(2048, 27)); // Qwen down at batch 8 (3456)
  EXPECT_TRUE(moe_stream_split(100, 0));    // unknown: split
  // A larger warp factor (the int4 candidate): Mixtral's down at 4 tokens (5 experts, 1280 row groups) splits
  // at 4x, not at 1x; at 8 experts (2048) too; gate_up at 8 experts (14336) does not.
  EXPECT_FALSE(moe_stream_split(4096, 5));
  EXPECT_TRUE(moe_stream_split(4096, 5, 4));
  EXPECT_TRUE(moe_stream_split(4096, 8, 4));
  EXPECT_FALSE(moe_stream_split(28672, 8, 4));
}

TEST(MoeTiles, GemvTakesOnlyCallsExpectedToHoldAtMostFourRowsPerExpert) {
  // Decode at small batch (1-4 rows per touched expert); an unknown busiest expert (0) or five
  // rows go to the MMA kernels, which use each weight fragment for 8 routed rows.
  EXPECT_TRUE(moe_gemv_rows(1));
  EXPECT_TRUE(moe_gemv_rows(2));
  EXPECT_TRUE(moe_gemv_rows(4));
  EXPECT_FALSE(moe_gemv_rows(0));
  EXPECT_FALSE(moe_gemv_rows(5));
  EXPECT_FALSE(moe_gemv_rows(-1));
  static_assert(moe_gemv_rows(1) && moe_gemv_rows(4) && moe_gemv_rows(0) == false);
}

}  // namespace

// The pricer keeps profile rows apart by moe_kernel_class (planner/model/moe_kernel_class.hpp): two
// busiest-expert counts of one class must run the same kernel here, for the gathered gate_up and the
// sorted down GEMM alike (the gemv's passes: 1 row, 2 rows, 4 rows; else the stream / tiled kind).
TEST(MoeTiles, PricerKernelClassesMatchTheKernelChoice) {
  auto kernel = [](int64_t max_rows, bool gathered) {
    if (moe_gemv_rows(max_rows)) return max_rows <= 2 ? int(max_rows) : 4;  // gemv rows per pass
    return 10 + moe_gemm_tile_kind(max_rows, gathered);
  };
  for (bool gathered : {false, true})
    for (int64_t a = 1; a <= 80; ++a)
      for (int64_t b = 1; b <= 80; ++b)
        if (peerplan::moe_kernel_class(a) == peerplan::moe_kernel_class(b))
          EXPECT_EQ(kernel(a, gathered), kernel(b, gathered)) << a << " and " << b << (gathered ? " gathered" : "");
  EXPECT_EQ(peerplan::moe_kernel_class(0), 0);
  EXPECT_NE(peerplan::moe_kernel_class(2), peerplan::moe_kernel_class(3));  // 2 rows per pass vs 4
}

TEST(MoeTiles, RouteThreadsCoverTheExpertsAndAWarpPerToken) {
  EXPECT_EQ(moe_route_threads(1, 60), 64);     // Qwen1.5-MoE at batch 1: a thread per expert
  EXPECT_EQ(moe_route_threads(1, 8), 64);      // Mixtral: the smallest block
  EXPECT_EQ(moe_route_threads(1, 160), 256);   // DeepSeek-V2's 160 experts
  EXPECT_EQ(moe_route_threads(8, 60), 256);    // a warp per token
  EXPECT_EQ(moe_route_threads(128, 8), 1024);  // up to 32 warps
  for (int64_t tokens : {1, 2, 3, 7, 31, 33, 64, 127, 128})
    for (int64_t experts : {1, 8, 60, 64, 65, 256, 257, 1000, 1024}) {
      const int t = moe_route_threads(tokens, experts);
      EXPECT_GE(t, experts) << tokens << " " << experts;  // thread e owns local expert e
      EXPECT_LE(t, 1024);
      EXPECT_EQ(t & (t - 1), 0) << "a power of two: one of the kernel's instances";
      EXPECT_TRUE(t >= tokens * 32 || t == 1024) << tokens << " " << experts;
    }
}
