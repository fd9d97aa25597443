#pragma once
// Tile bookkeeping of the routed-MoE kernels (profiler/kernels/moe_route.hpp, moe_gemm.hpp),
// CPU-side so the grid bound and the kernel choice are tested without a GPU
// (tests/profiler/moe_tiles_test.cpp). constexpr: device-callable under --expt-relaxed-constexpr.
#include <cstdint>

namespace peerplan::kernels {

// The route kernel lists the non-empty (expert, row tile) pairs for three tile heights.
inline constexpr int kMoeTileKinds = 3;
constexpr int moe_tile_rows(int kind) { return 16 << kind; }  // 16, 32, 64

// Threads of the one-CTA route kernel (moe_route.hpp): one per local expert and a warp per token up to
// 32 warps, as a power of two in [64, 1024]. At batch 1 a block of 1024 threads spent most of the route's
// ~6 us in block-wide barriers and scans (Qwen1.5-MoE's 60 experts need 64 threads).
constexpr int moe_route_threads(int64_t tokens, int64_t local_experts) {
  int t = 64;
  while (t < 1024 && (t < local_experts || t < tokens * 32)) t *= 2;
  return t;
}

// Most tiles of height `tile_rows` that `entries` routed (token, expert) rows over `experts` local
// experts can need: sum over experts of ceil(rows_e / tile) <= entries / tile + touched, and
// touched <= min(entries, experts). The grouped GEMM's grid is sized by it.
constexpr int64_t moe_max_tiles(int64_t entries, int64_t experts, int tile_rows) {
  const int64_t touched = entries < experts ? entries : experts;
  return entries / tile_rows + touched + 1;
}

// Which kernel (and tile list) a grouped GEMM whose busiest expert has `max_rows` rows takes:
// 0 = stream, 16-row tiles; 1 = stream, 32-row tiles; 2 = tiled, 64-row tiles (max_rows 0 =
// unknown: 2, right for any size). Measured on H200 (docs/validation/runs/2026-12-02-moe): one
// row per expert (batch 1) runs best on 16-row tiles; the gathered gate_up GEMM with 2..32 rows
// on 32-row tiles (4-7 % faster than 16-row ones at Qwen1.5-MoE and Mixtral shapes), the down
// GEMM (rows in sorted order) on 16-row tiles up to 16 rows; past 32 rows the tiled kernel.
constexpr int moe_gemm_tile_kind(int64_t max_rows, bool gathered = false) {
  if (max_rows <= 0 || max_rows > moe_tile_rows(1)) return 2;
  if (max_rows == 1) return 0;
  if (gathered) return 1;
  return max_rows <= moe_tile_rows(0) ? 0 : 1;
}

// Whether the stream kernel splits k over 4 warps of a CTA: when the touched experts' 16-row weight
// groups alone give fewer than 8 warps per SM (of 132). Measured on H200: at 512-704 such warps
// (batch 1 of Qwen1.5-MoE, Mixtral's down) the split streams 1.8-2.2x faster; from 2048 up it is
// 4-30 % slower. touched = 0 (unknown): split. `warp_factor` scales the warp count below which k is
// split: 1 for bf16 and FP8; int4 takes it from PEERPLAN_INT4_SPLIT_WARPS (default 1; its loads carry a
// quarter of bf16's bytes, so a larger factor is the candidate: docs/quantization.md, int4 routed experts).
constexpr bool moe_stream_split(int64_t n, int64_t touched, int64_t warp_factor = 1) {
  return touched <= 0 || (n + 15) / 16 * touched < 8 * 132 * warp_factor;
}

// Whether a stream-kind call (kind 0 or 1) runs the gemv kernel instead of the MMA stream kernel:
// when the busiest expert is expected to hold at most 4 rows (decode at small batch), where weight
// bandwidth is everything: the gemv reads each weight once per 2 (max_rows <= 2) or 4 routed rows.
// It is correct for any row count (a tile's rows are taken 2 or 4 at a time), only slower past
// them. PEERPLAN_MOE_GEMV=0 turns it off (A/B runs: moe_gemm.cu).
constexpr bool moe_gemv_rows(int64_t max_rows) { return max_rows >= 1 && max_rows <= 4; }

}  // namespace peerplan::kernels
