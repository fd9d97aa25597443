// The packed order of int4 routed experts (profiler/common/w4_expert_layout.hpp): what the grouped
// int4 kernels and the self-test's reference both address through.
#include "profiler/common/w4_expert_layout.hpp"

#include <gtest/gtest.h>

#include <set>
#include <vector>

namespace peerplan::kernels {
namespace {

// Every code of `experts` experts of [n][k] has one (word, nibble) of its own inside the experts' words,
// and every scale index is inside the experts' scales.
TEST(W4ExpertLayout, EveryCodeHasItsOwnNibble) {
  for (auto [e, n, k] : std::vector<std::tuple<int64_t, int64_t, int64_t>>{{1, 16, 128}, {3, 48, 384}, {2, 32, 1408}}) {
    std::vector<uint32_t> used(size_t(w4e_words(e, n, k)), 0);
    for (int64_t x = 0; x < e; ++x)
      for (int64_t r = 0; r < n; ++r)
        for (int64_t kk = 0; kk < k; ++kk) {
          const int64_t w = w4e_word(n, k, x, r, kk);
          ASSERT_GE(w, 0);
          ASSERT_LT(w, w4e_words(e, n, k));
          const uint32_t bit = 1u << (w4e_shift(kk) / 4);
          ASSERT_EQ(used[size_t(w)] & bit, 0u) << "expert " << x << " row " << r << " k " << kk;
          used[size_t(w)] |= bit;
          const int64_t s = w4e_scale(n, k, x, r, kk);
          ASSERT_GE(s, 0);
          ASSERT_LT(s, w4e_scales(e, n, k));
        }
    for (uint32_t u : used) ASSERT_EQ(u, 0xFFu);
  }
}

// The stream kernel's load: lane (g, t) reads rows g and g + 8, k 32t .. 32t + 31 of a group, 16 bytes each;
// the 32 lanes' 16-byte pieces tile one contiguous 1 KB chunk.
TEST(W4ExpertLayout, AWarpsChunkIsContiguous) {
  const int64_t n = 2816, k = 2048, e = 5, tile = 7, grp = 3;
  const int64_t base = w4e_word(n, k, e, 16 * tile, 128 * grp);
  EXPECT_EQ(base % kW4eChunkWords, 0);
  std::set<int64_t> words;
  for (int g = 0; g < 8; ++g)
    for (int t = 0; t < 4; ++t)
      for (int half = 0; half < 2; ++half) {
        const int64_t w = w4e_word(n, k, e, 16 * tile + g + 8 * half, 128 * grp + 32 * t);
        EXPECT_EQ(w, base + (g + 8 * half) * 16 + 4 * t);
        for (int i = 0; i < 4; ++i) words.insert(w + i);
        // The lane's 32 codes are its 4 words in k order.
        for (int kk = 0; kk < 32; ++kk) EXPECT_EQ(w4e_word(n, k, e, 16 * tile + g + 8 * half, 128 * grp + 32 * t + kk), w + kk / 8);
      }
  EXPECT_EQ(int64_t(words.size()), kW4eChunkWords);
  EXPECT_EQ(*words.begin(), base);
  EXPECT_EQ(*words.rbegin(), base + kW4eChunkWords - 1);
}

// A natural (even, odd) k pair shares one shift: nibble p and nibble p + 4, 16 bits apart.
TEST(W4ExpertLayout, PairsSitSixteenBitsApart) {
  for (int64_t kk = 0; kk < 128; kk += 2) {
    EXPECT_EQ(w4e_shift(kk) % 16, (kk % 8) / 2 * 4);
    EXPECT_EQ(w4e_shift(kk) / 16, 0);
    EXPECT_EQ(w4e_shift(kk + 1), w4e_shift(kk) + 16);
  }
  EXPECT_TRUE(w4e_shape_ok(2816, 1408));
  EXPECT_FALSE(w4e_shape_ok(2880, 2880));  // gpt-oss: k not a multiple of 128
  EXPECT_FALSE(w4e_shape_ok(200, 256));    // n not a multiple of 16
}

}  // namespace
}  // namespace peerplan::kernels
