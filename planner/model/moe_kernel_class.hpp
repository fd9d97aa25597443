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

}  // namespace peerplan
