#pragma once
// Which of the executor's expert kernels a grouped GEMM runs, as a function of its busiest expert's
// rows (max_rows): the executor picks the kernel for the whole call from that count
// (profiler/common/moe_tiles.hpp: moe_gemv_rows, moe_gemm_tile_kind; tests/profiler/moe_tiles_test.cpp
// checks the two agree), so a profile row prices an op only if it was timed on the same kernel.
// Classes: 1 = one row per expert (gemv, 1 row per pass), 2 = two rows (gemv, 2 per pass), 3 = three
// or four (gemv, 4 per pass), 4 = 5..16 (stream kernel, 16-row tiles; gathered gate_up: 32-row),
// 5 = 17..32 (32-row tiles), 6 = more (the tiled kernel); 0 = unknown. Here, not in profiler/, because
// planner/ may not include profiler/ (DESIGN.md) and the pricer needs it.
#include <cstdint>

namespace peerplan {

constexpr int moe_kernel_class(int64_t max_rows) {
  if (max_rows <= 0) return 0;
  if (max_rows <= 2) return int(max_rows);
  if (max_rows <= 4) return 3;
  if (max_rows <= 16) return 4;
  if (max_rows <= 32) return 5;
  return 6;
}

// Whether that kernel is one of the gemv's (busiest expert 1..4 rows: decode sizes), where one row
// more changes the kernel and the cost per expert most.
constexpr bool moe_gemv_class(int64_t max_rows) {
  const int c = moe_kernel_class(max_rows);
  return c >= 1 && c <= 3;
}

// The other choice: in an eager iteration (more than kGraphTimedMaxRows tokens routed), prefill-sized
// groups run as cuBLASLt calls, one per touched expert, instead of the grouped kernel. The rule and its
// measured threshold are explained in profiler/common/moe_cublas_rule.hpp, which applies it (with the
// PEERPLAN_MOE_CUBLAS_MIN_GFLOP override); here so the pricer prices a prefill op from the profile's
// rows of the same path: the two paths' costs per expert differ up to 3x, and a price interpolated
// between a grouped row (256 tokens) and a cuBLAS row (512) put Mixtral int8 prefill 13-16 % high
// (H100, 2026-12-06, session 25).
inline constexpr double kMoeCublasMinGflop = 2.5;

// Mean FLOPs per touched expert, in GFLOP (0 when nothing is touched).
constexpr double moe_gflop_per_expert(int64_t rows, int64_t touched, int64_t n, int64_t k) {
  if (touched <= 0 || rows <= 0) return 0;
  return 2.0 * double(rows) / double(touched) * double(n) * double(k) * 1e-9;
}

// Whether an eager call of this load takes the cuBLAS path: n and k multiples of 128 (rows 256-byte
// aligned, as cuBLASLt's heuristic assumes), and either a threshold of 0 (always) or the tiled
// kernel's range (busiest expert > 32 rows, or unknown) with at least min_gflop per touched expert.
constexpr bool moe_cublas_path(int64_t rows, int64_t touched, int64_t max_rows, int64_t n, int64_t k,
                               double min_gflop) {
  if (rows <= 0 || n <= 0 || k <= 0 || n % 128 != 0 || k % 128 != 0) return false;
  if (min_gflop <= 0) return true;
  if (max_rows > 0 && max_rows <= 32) return false;
  return moe_gflop_per_expert(rows, touched, n, k) >= min_gflop;
}

}  // namespace peerplan
