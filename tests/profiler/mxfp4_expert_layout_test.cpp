// MXFP4 routed experts (profiler/common/mxfp4_expert_layout.hpp): the packed order the grouped kernels and
// the self-test's reference both address through, and the byte-permute decode of e2m1 codes to bf16.
#include "profiler/common/mxfp4_expert_layout.hpp"

#include <gtest/gtest.h>

#include <cstring>
#include <set>
#include <tuple>
#include <vector>

namespace peerplan::kernels {
namespace {

double bf16_bits_value(uint32_t bits16) {
  const uint32_t f = bits16 << 16;
  float v;
  std::memcpy(&v, &f, 4);
  return v;
}

// Every code of `experts` experts of [n][k] has one nibble of its own inside the experts' words, and every
// scale index one byte inside the experts' scales (gpt-oss-20b's k = 2880 included: 45 chunks of 64).
TEST(MxExpertLayout, EveryCodeHasItsOwnNibble) {
  for (auto [e, n, k] : std::vector<std::tuple<int64_t, int64_t, int64_t>>{{1, 16, 64}, {3, 48, 192}, {2, 32, 2880}}) {
    ASSERT_TRUE(mxe_shape_ok(n, k));
    std::vector<uint32_t> used(size_t(mxe_words(e, n, k)), 0);
    std::vector<int> scale_uses(size_t(mxe_scales(e, n, k)), 0);
    for (int64_t x = 0; x < e; ++x)
      for (int64_t r = 0; r < n; ++r)
        for (int64_t kk = 0; kk < k; ++kk) {
          const int64_t w = mxe_word(n, k, x, r, kk);
          ASSERT_GE(w, 0);
          ASSERT_LT(w, mxe_words(e, n, k));
          const uint32_t bit = 1u << (kk % 8);
          ASSERT_EQ(used[size_t(w)] & bit, 0u) << "expert " << x << " row " << r << " k " << kk;
          used[size_t(w)] |= bit;
          const int64_t s = mxe_scale(n, k, x, r, kk);
          ASSERT_GE(s, 0);
          ASSERT_LT(s, mxe_scales(e, n, k));
          ++scale_uses[size_t(s)];
        }
    for (uint32_t u : used) ASSERT_EQ(u, 0xFFu);
    for (int u : scale_uses) ASSERT_EQ(u, kMxBlock);  // each scale covers one row's 32 consecutive k
  }
}

// The stream kernel's load: lane (g, t) reads rows g and g + 8, k 16t .. 16t + 15 of a chunk (two words each);
// the 32 lanes' pieces tile one contiguous 512-byte chunk, rows g at lane * 2 words.
TEST(MxExpertLayout, AWarpsChunkIsContiguous) {
  const int64_t n = 5760, k = 2880, e = 5, tile = 7, chunk = 44;
  const int64_t base = mxe_word(n, k, e, 16 * tile, 64 * chunk);
  EXPECT_EQ(base % kMxChunkWords, 0);
  std::set<int64_t> words;
  for (int g = 0; g < 8; ++g)
    for (int t = 0; t < 4; ++t)
      for (int half = 0; half < 2; ++half) {
        const int64_t w = mxe_word(n, k, e, 16 * tile + g + 8 * half, 64 * chunk + 16 * t);
        EXPECT_EQ(w, base + half * 64 + (g * 4 + t) * 2);
        for (int kk = 0; kk < 16; ++kk) EXPECT_EQ(mxe_word(n, k, e, 16 * tile + g + 8 * half, 64 * chunk + 16 * t + kk), w + kk / 8);
        words.insert(w), words.insert(w + 1);
      }
  EXPECT_EQ(int64_t(words.size()), kMxChunkWords);
  EXPECT_EQ(*words.rbegin(), base + kMxChunkWords - 1);
  // A lane's 16 codes lie in one 32-k block: lanes t = 0, 1 read block 2 chunk, t = 2, 3 the next.
  for (int t = 0; t < 4; ++t)
    EXPECT_EQ(mxe_scale(n, k, e, 3, 64 * chunk + 16 * t), mxe_scale(n, k, e, 3, 64 * chunk + 16 * t + 15));
  EXPECT_EQ(mxe_scale(n, k, e, 3, 64 * chunk + 32) - mxe_scale(n, k, e, 3, 64 * chunk), n);
}

// The host emulation of prmt follows PTX: byte i of the result is byte (s >> 4i) & 7 of {lo, hi}.
TEST(MxDecode, BytePermSelectsBytes) {
  EXPECT_EQ(mx_byte_perm(0x33221100u, 0x77665544u, 0x3210u), 0x33221100u);
  EXPECT_EQ(mx_byte_perm(0x33221100u, 0x77665544u, 0x7654u), 0x77665544u);
  EXPECT_EQ(mx_byte_perm(0x33221100u, 0x77665544u, 0x5140u), 0x55114400u);
  EXPECT_EQ(mx_byte_perm(0x33221100u, 0x77665544u, 0x0707u), 0x00770077u);
}

// Every code in every nibble decodes to its e2m1 value, exactly, in the half of its pair.
TEST(MxDecode, EveryCodeInEveryPosition) {
  EXPECT_EQ(e2m1_value(0x1), 0.5);
  EXPECT_EQ(e2m1_value(0x7), 6.0);
  EXPECT_EQ(e2m1_value(0xD), -3.0);
  for (int pos = 0; pos < 8; ++pos)
    for (uint32_t c = 0; c < 16; ++c) {
      // Other nibbles hold other codes, so a wrong selector or sign shift shows.
      const uint32_t fill = 0x9E3779B9u & ~(0xFu << (4 * pos));
      const uint32_t w = fill | (c << (4 * pos));
      const uint32_t pair = mxfp4_pair(w, pos / 2);
      const uint32_t half = (pos % 2) ? pair >> 16 : pair & 0xFFFFu;
      EXPECT_EQ(bf16_bits_value(half), e2m1_value(c)) << "code " << c << " nibble " << pos;
      if (c == 8) EXPECT_EQ(half, 0x8000u);  // -0
    }
}

TEST(MxDecode, ScaleByteIsAPowerOfTwo) {
  EXPECT_EQ(bf16_bits_value(e8m0_bf16_bits(127)), 1.0);
  EXPECT_EQ(bf16_bits_value(e8m0_bf16_bits(120)), 1.0 / 128);
  EXPECT_EQ(bf16_bits_value(e8m0_bf16_bits(130)), 8.0);
  // A code times a scale stays exact in bf16: 1.5 * 2^-7 has 2 significant bits.
  EXPECT_EQ(bf16_bits_value(e8m0_bf16_bits(120)) * e2m1_value(3), 1.5 / 128);
}

TEST(MxExpertLayout, ShapeRule) {
  EXPECT_TRUE(mxe_shape_ok(5760, 2880));  // gpt-oss gate_up
  EXPECT_TRUE(mxe_shape_ok(2880, 2880));  // gpt-oss down
  EXPECT_FALSE(mxe_shape_ok(2880, 2848));
  EXPECT_FALSE(mxe_shape_ok(2888, 2880));
}

}  // namespace
}  // namespace peerplan::kernels
