#pragma once
// Word order of packed W4A16 weights (profiler/kernels/w4a16.hpp), CPU-side so the address
// arithmetic every reader shares is tested without a GPU (tests/profiler/w4_layout_test.cpp).
// constexpr: device-callable under --expt-relaxed-constexpr.
#include <cstdint>

namespace peerplan::kernels {

// A 16-byte unit holds 32 codes: one row's 32-k quarter of one 128-k scale group. Gptq: row-major
// [n][k / 8] words. Tiled: the units of 8 consecutive rows x 4 quarters of one group side by side
// (512 contiguous bytes: one warp's load), groups in order, then the next 8 rows.
enum class W4Layout { Gptq, Tiled };

// Where packed word j (k = 8j .. 8j + 7) of row r lies, in words: (r / 8) * k + (r % 8) * row
// + (j / 16) * chunk + j % 16, with (row, chunk) = (k / 8, 16) for Gptq, (16, 128) tiled. 8 rows
// are k words in either order, so a kernel steps between row tiles the same way in both.
constexpr int64_t w4_row_stride(W4Layout l, int64_t k) { return l == W4Layout::Gptq ? k / 8 : 16; }
constexpr int64_t w4_chunk_stride(W4Layout l) { return l == W4Layout::Gptq ? 16 : 128; }
constexpr int64_t w4_word_index(W4Layout l, int64_t r, int64_t j, int64_t k) {
  return (r / 8) * k + (r % 8) * w4_row_stride(l, k) + (j / 16) * w4_chunk_stride(l) + j % 16;
}

}  // namespace peerplan::kernels
