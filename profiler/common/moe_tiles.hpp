#pragma once
// Tile bookkeeping of the routed-MoE kernels (profiler/kernels/moe_route.hpp, moe_gemm.hpp),
// CPU-side so the grid bound and the kernel choice are tested without a GPU
// (tests/profiler/moe_tiles_test.cpp). constexpr: device-callable under --expt-relaxed-constexpr.
#include <cstdint>

namespace peerplan::kernels {

// The route kernel lists the non-empty (expert, row tile) pairs for three tile heights.
inline constexpr int kMoeTileKinds = 3;
constexpr int moe_tile_rows(int kind) { return 16 << kind; }  // 16, 32, 64

// Most tiles of height `tile_rows` that `entries` routed (token, expert) rows over `experts` local
// experts can need: sum over experts of ceil(rows_e / tile) <= entries / tile + touched, and
// touched <= min(entries, experts). The grouped GEMM's grid is sized by it.
constexpr int64_t moe_max_tiles(int64_t entries, int64_t experts, int tile_rows) {
  const int64_t touched = entries < experts ? entries : experts;
  return entries / tile_rows + touched + 1;
}

// Which kernel (and tile list) a grouped GEMM whose busiest expert has `max_rows` rows takes:
// 0 = stream, 16-row tiles; 1 = stream, 32-row tiles; 2 = tiled, 64-row tiles (0 = unknown).
constexpr int moe_gemm_tile_kind(int64_t max_rows) {
  if (max_rows > 0 && max_rows <= moe_tile_rows(0)) return 0;
  if (max_rows > 0 && max_rows <= moe_tile_rows(1)) return 1;
  return 2;
}

}  // namespace peerplan::kernels
