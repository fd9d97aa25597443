#pragma once
// Packed order of int4 (W4A16) routed experts (profiler/kernels/moe_gemm_int4.cu), CPU-side so the
// address arithmetic the kernels and the self-test's reference share is tested without a GPU
// (tests/profiler/w4_expert_layout_test.cpp). constexpr: device-callable under
// --expt-relaxed-constexpr.
//
// Codes are GPTQ's symmetric 4-bit scheme (weight = (q - 8) * scale, one bf16 scale per expert row
// and 128 k), laid out for the grouped kernels the way engines repack a checkpoint once at load
// (Marlin, Machete): an expert's rows in 16-row tiles, k in 128-code groups; the (tile, group) chunk
// of 16 rows x 64 bytes is contiguous, which is exactly one warp's load in the stream kernel (lane
// (g, t) reads rows g and g + 8, words 4t..4t+3). Inside a row's 16 words, word j holds k = 8j .. 8j+7
// of the group with the even k in nibbles 0-3 and the odd k in nibbles 4-7, so one shift and one
// mask put a natural (even, odd) k pair in a bf16x2's two halves (moe_gemm_int4.cu: int4_pair).
// Requires n % 16 == 0 and k % 128 == 0 (w4e_shape_ok).
#include <cstdint>

namespace peerplan::kernels {

constexpr int64_t kW4eTileRows = 16, kW4eGroup = 128;
constexpr int64_t kW4eChunkWords = kW4eTileRows * kW4eGroup / 8;  // 256

constexpr bool w4e_shape_ok(int64_t n, int64_t k) {
  return n > 0 && k > 0 && n % kW4eTileRows == 0 && k % kW4eGroup == 0;
}
// The word holding code (row, kk) of expert e, experts [e][n][k].
constexpr int64_t w4e_word(int64_t n, int64_t k, int64_t e, int64_t row, int64_t kk) {
  return ((e * (n / kW4eTileRows) + row / kW4eTileRows) * (k / kW4eGroup) + kk / kW4eGroup) * kW4eChunkWords +
         (row % kW4eTileRows) * (kW4eGroup / 8) + (kk % kW4eGroup) / 8;
}
// The bit position of code kk inside its word: k = 8j + 2p in nibble p, k = 8j + 2p + 1 in nibble p + 4.
constexpr int w4e_shift(int64_t kk) { return int((kk % 8) / 2) * 4 + int(kk % 2) * 16; }
// The scale of (row, kk) of expert e: [e][k / 128][n], so a warp's 16 rows of a group are adjacent.
constexpr int64_t w4e_scale(int64_t n, int64_t k, int64_t e, int64_t row, int64_t kk) {
  return (e * (k / kW4eGroup) + kk / kW4eGroup) * n + row;
}
// Words and scales of `experts` experts of [n][k].
constexpr int64_t w4e_words(int64_t experts, int64_t n, int64_t k) { return experts * n * k / 8; }
constexpr int64_t w4e_scales(int64_t experts, int64_t n, int64_t k) { return experts * n * (k / kW4eGroup); }

}  // namespace peerplan::kernels
