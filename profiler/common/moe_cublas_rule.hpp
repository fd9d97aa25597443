#pragma once
// When a routed-expert GEMM (issue 14) runs as cuBLASLt calls, one per touched expert, instead of the
// grouped kernel (profiler/kernels/moe_gemm.hpp). The executor (engine_moe.cpp) and the profiler
// (measure/grouped_gemm.cpp) both go through profiler/kernels/moe_expert_gemm.hpp, which asks this
// rule, so the profile times what the executor runs. CPU-side, tested in tests/profiler.
//
// cuBLASLt needs each expert's row count on the host, and the routing lives on the device: the
// cuBLAS path copies the offsets back and waits for the stream (one synchronisation per call), so
// it is taken only where that is allowed (an eager iteration: never while a CUDA graph is being
// captured, so decode graphs keep the device-only path) and pays off:
//   - the call would run the tiled kernel (the busiest expert holds more than 32 rows,
//     moe_gemm_tile_kind == 2): below, the stream / gemv kernels read the weights at HBM speed and
//     cuBLAS has nothing to win;
//   - the mean work per touched expert, 2 * rows / touched * n * k, is at least the threshold
//     (default kMoeCublasMinGflop; PEERPLAN_MOE_CUBLAS_MIN_GFLOP overrides it: 0 = always cuBLAS when
//     eager, whatever the rows and the tile kind; a huge value = never);
//   - n and k are multiples of 128 (each expert's rows then start 256-byte aligned, the alignment
//     cuBLASLt's heuristic assumes by default; elsewhere the grouped kernel runs, threshold 0 too).
// Why 2.5 GFLOP (H200, 2026-12-04, docs/validation/runs/2026-12-04-session13/S3, "prefill-sized
// groups", our tiled kernel vs cuBLASLt per expert): Qwen1.5-MoE gate_up at 136 rows per expert
// (1.6 GFLOP) ours 447 vs 533 us, down at 273 rows (1.6 GFLOP) 453 vs 437 (even); gate_up at 273
// rows (3.2 GFLOP) 774 vs 646 and every Mixtral group from 64 rows (7.5 GFLOP and up) 1.4-3x
// faster in cuBLAS. The crossing lies between 1.6 and 3.2; 2.5 takes every measured win and no loss,
// with margin for the D2H copy, the synchronisation and gate_up's row gather the cuBLAS path adds.
#include <cstdint>
#include <string>

#include "planner/compile/graph_batch.hpp"
#include "planner/model/moe_kernel_class.hpp"

namespace peerplan::kernels {

using peerplan::kMoeCublasMinGflop;  // planner/model/moe_kernel_class.hpp: the pricer applies the same rule
// Only iterations of more than kGraphTimedMaxRows tokens (planner/compile/graph_batch.hpp) may take
// cuBLAS: the profile times the dispatch at those token counts only (measure/grouped_gemm.cpp), so an
// eager iteration of fewer runs the grouped kernel its row was timed with.

// What the host knows of a grouped GEMM before its routing is read back: the compiler's (or the
// profiler's) routed rows, touched experts and busiest expert's rows, and the expert shape.
struct MoeExpertLoad {
  int64_t rows = 0, touched = 0, max_rows = 0;
  int64_t n = 0, k = 0;
};

// Mean FLOPs per touched expert (0 when nothing is touched).
double moe_gflop_per_expert(const MoeExpertLoad& l);

// Whether the call runs cuBLASLt per expert. `eager`: the caller may synchronise with the host
// (not inside a CUDA graph capture). min_gflop < 0: moe_cublas_min_gflop().
bool moe_use_cublas(const MoeExpertLoad& l, bool eager, double min_gflop = -1);

// The threshold in force: PEERPLAN_MOE_CUBLAS_MIN_GFLOP if set (a number >= 0; anything else throws
// InputError naming the variable), else kMoeCublasMinGflop. Read at every call (cheap), so a test
// or a sweep may change it between calls.
double moe_cublas_min_gflop();

// The rule in words, with the threshold in force (the profile records it).
std::string moe_cublas_rule_text(double min_gflop = -1);

}  // namespace peerplan::kernels
