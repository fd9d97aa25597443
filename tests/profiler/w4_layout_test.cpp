// The packed int4 word order every W4A16 reader shares (profiler/common/w4_layout.hpp).
#include "profiler/common/w4_layout.hpp"

#include <gtest/gtest.h>

#include <vector>

namespace peerplan::kernels {
namespace {

// Both orders place every word of an n x k weight exactly once inside its n * k / 8 words.
TEST(W4Layout, EachOrderIsAPermutationOfTheWeightsWords) {
  for (W4Layout l : {W4Layout::Gptq, W4Layout::Tiled})
    for (auto [n, k] : {std::pair<int64_t, int64_t>{8, 128}, {24, 384}, {136, 1024}}) {
      std::vector<int> hits(size_t(n * k / 8), 0);
      for (int64_t r = 0; r < n; ++r)
        for (int64_t j = 0; j < k / 8; ++j) {
          const int64_t w = w4_word_index(l, r, j, k);
          ASSERT_GE(w, 0);
          ASSERT_LT(w, n * k / 8) << "r=" << r << " j=" << j;
          ++hits[size_t(w)];
        }
      for (int h : hits) ASSERT_EQ(h, 1);
    }
}

TEST(W4Layout, GptqIsRowMajor) {
  const int64_t k = 4096;
  EXPECT_EQ(w4_word_index(W4Layout::Gptq, 0, 5, k), 5);
  EXPECT_EQ(w4_word_index(W4Layout::Gptq, 13, 77, k), 13 * (k / 8) + 77);
}

// What the kernels rely on: lane (g, t) of a warp loads row 8i + g's 16 bytes at quarter t of group c;
// tiled, the 32 lanes' loads are one contiguous 512 bytes, and a row tile is k words on.
TEST(W4Layout, TiledPutsAWarpsLoadInOne512ByteRun) {
  const int64_t k = 14336;
  for (int64_t tile : {0, 3})
    for (int64_t c : {0, 1, 111}) {
      const int64_t base = w4_word_index(W4Layout::Tiled, 8 * tile, 16 * c, k);
      EXPECT_EQ(base % 128, 0);
      for (int g = 0; g < 8; ++g)
        for (int t = 0; t < 4; ++t)
          for (int w = 0; w < 4; ++w)
            EXPECT_EQ(w4_word_index(W4Layout::Tiled, 8 * tile + g, 16 * c + 4 * t + w, k), base + 16 * g + 4 * t + w);
    }
  for (W4Layout l : {W4Layout::Gptq, W4Layout::Tiled})
    EXPECT_EQ(w4_word_index(l, 8 + 5, 40, k) - w4_word_index(l, 5, 40, k), k);
}

}  // namespace
}  // namespace peerplan::kernels
