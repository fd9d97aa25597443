#pragma once
// MXFP4 routed experts (gpt-oss; OCP microscaling FP4): the packed order the grouped kernels read
// (profiler/kernels/moe_gemm_mxfp4.cu) and the code -> bf16 decode they use, CPU-side so the address
// arithmetic and the bit tricks are tested without a GPU (tests/profiler/mxfp4_expert_layout_test.cpp).
// constexpr / __host__ __device__: device-callable under --expt-relaxed-constexpr.
//
// A weight is e2m1(code) * 2^(E - 127): a 4-bit code (sign, 2 exponent bits, 1 mantissa bit: magnitudes
// 0, 0.5, 1, 1.5, 2, 3, 4, 6) and one e8m0 byte E per 32 consecutive k of a row (the checkpoint's
// `*_blocks` / `*_scales`). Laid out as the int4 experts are (w4_expert_layout.hpp), repacked once at load
// as engines do: an expert's rows in 16-row tiles, k in 64-code chunks (gpt-oss's k = 2880 is a multiple of
// 64, not of 128); the (tile, chunk) piece of 16 rows x 32 bytes is contiguous, so the stream kernel's warp
// load (lane (g, t): rows g and g + 8, k 16t .. 16t + 15, 8 bytes each) is one 512-byte piece. Inside a word
// code k = 8j + i sits in nibble i (the checkpoint's order: the low nibble of a byte is the even k).
// Scales: one byte per (expert, 32-k block, row), [e][k / 32][n], so a warp's 16 rows of a block are
// adjacent. Requires n % 16 == 0 and k % 64 == 0 (mxe_shape_ok).
#include <cstdint>

#include "planner/core/host_device.hpp"

namespace peerplan::kernels {

constexpr int64_t kMxTileRows = 16, kMxChunk = 64, kMxBlock = 32;
constexpr int64_t kMxChunkWords = kMxTileRows * kMxChunk / 8;  // 128

constexpr bool mxe_shape_ok(int64_t n, int64_t k) {
  return n > 0 && k > 0 && n % kMxTileRows == 0 && k % kMxChunk == 0;
}
// The word holding code (row, kk) of expert e (nibble kk % 8), experts [e][n][k].
constexpr int64_t mxe_word(int64_t n, int64_t k, int64_t e, int64_t row, int64_t kk) {
  return ((e * (n / kMxTileRows) + row / kMxTileRows) * (k / kMxChunk) + kk / kMxChunk) * kMxChunkWords +
         (row % kMxTileRows) * (kMxChunk / 8) + (kk % kMxChunk) / 8;
}
// The scale byte of (row, kk) of expert e.
constexpr int64_t mxe_scale(int64_t n, int64_t k, int64_t e, int64_t row, int64_t kk) {
  return (e * (k / kMxBlock) + kk / kMxBlock) * n + row;
}
constexpr int64_t mxe_words(int64_t experts, int64_t n, int64_t k) { return experts * n * k / 8; }
constexpr int64_t mxe_scales(int64_t experts, int64_t n, int64_t k) { return experts * n * (k / kMxBlock); }

// The e2m1 value of a 4-bit code (the reference's decode).
constexpr double e2m1_value(uint32_t code) {
  constexpr double mag[8] = {0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0};
  return (code & 8u) ? -mag[code & 7u] : mag[code & 7u];
}
// An e8m0 scale byte as bf16 bits (2^(E - 127); exact for E in 1..254: bf16 keeps fp32's exponent). E = 0
// (2^-127, subnormal) reads as 0 and 255 (NaN) as infinity; checkpoints use neither.
constexpr uint16_t e8m0_bf16_bits(uint32_t e) { return uint16_t((e & 0xFFu) << 7); }

// PTX prmt (__byte_perm) on the host too, so the decode below is tested on the CPU: byte i of the result is
// byte (s >> 4i) & 7 of the 8-byte {lo, hi}.
PEERPLAN_HD inline uint32_t mx_byte_perm(uint32_t lo, uint32_t hi, uint32_t s) {
#if defined(__CUDA_ARCH__)
  return __byte_perm(lo, hi, s);
#else
  const uint64_t v = (uint64_t(hi) << 32) | lo;
  uint32_t r = 0;
  for (int i = 0; i < 4; ++i) r |= uint32_t((v >> (8 * ((s >> (4 * i)) & 7u))) & 0xFFu) << (8 * i);
  return r;
#endif
}

// Codes 2p and 2p + 1 of word w (p = 0..3) as a bf16x2 (low half the even k), exact. The magnitudes' bf16
// bytes come from two 8-entry tables by byte permutes (one permute selects four codes' low bytes, one their
// high bytes; a third interleaves a pair), the signs by shifts: about 3 instructions a code, where the
// exponent-shift tricks int4 and e4m3 use would make 0.5 a bf16 subnormal.
PEERPLAN_HD inline uint32_t mxfp4_pair(uint32_t w, int p) {
  constexpr uint32_t kLo0 = 0xC0800000u, kLo1 = 0xC0804000u;  // low bytes of 0, .5, 1, 1.5 | 2, 3, 4, 6
  constexpr uint32_t kHi0 = 0x3F3F3F00u, kHi1 = 0x40404040u;  // high bytes
  const uint32_t sel = (w >> (16 * (p / 2))) & 0x7777u;       // codes 4(p/2) .. +3, sign bits cleared
  const uint32_t lo = mx_byte_perm(kLo0, kLo1, sel), hi = mx_byte_perm(kHi0, kHi1, sel);
  const uint32_t pair = mx_byte_perm(lo, hi, (p % 2) ? 0x7362u : 0x5140u);
  const uint32_t s = w >> (8 * p);  // the pair's sign bits at 3 and 7
  return pair | ((s << 12) & 0x8000u) | ((s << 24) & 0x80000000u);
}

}  // namespace peerplan::kernels
