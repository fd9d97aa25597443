#pragma once
// Timing of the model-dependent shapes (planner/topology/shape_set.hpp): the GPU half shared by a
// full profile's gemm, attention, grouped_gemm and elementwise measurements (which time every shape
// of the --model models, profiler/common/model_shapes.hpp) and by `profile --add-model` and validate's
// missing shapes (which time only the shapes the profile lacks). Each appends rows to ctx.ms and
// records how it timed them in ctx.ms.extra under its measurement's name. No CUDA types here.
#include <set>
#include <string>
#include <vector>

#include "planner/topology/shape_set.hpp"
#include "profiler/measure/context.hpp"

namespace peerplan::profiler {

// Every key at every m of `tokens`, through the executor's GEMM calls (bf16 cuBLASLt, the
// quantized runner for fp8 / int8 / int4), formats in the profiler's order. A format or shape
// that does not run is noted, not fatal.
void time_gemm_shapes(Context& ctx, const std::set<GemmShapeKey>& keys, const std::vector<int64_t>& tokens);

// Each head configuration over the decode (batch x context) and prefill (q_len x context) grids up
// to `max_context`, plus the held-back points that check the grid's interpolation.
void time_attention_shapes(Context& ctx, const std::set<AttentionShapeKey>& keys, int64_t max_context);

// Each grouped expert GEMM over the routed token counts `tokens` (the executor's kernel after
// its routing; the compiler's uniform routing counts).
void time_grouped_shapes(Context& ctx, const std::set<GroupedShapeKey>& keys, const std::vector<int64_t>& tokens);

// One expert's matmul on the eager cuBLAS path alone (the expert_gemms table, profiler/measure/expert_gemm.cpp),
// for each (n, k, dtype) of `keys` that can take that path, at the rows expert_gemm_rows plans from the
// same `tokens`. Run right after time_grouped_shapes: the pricer takes the path's fixed part from
// those rows, and a shape none of whose rows took the cuBLAS path is skipped.
void time_expert_shapes(Context& ctx, const std::set<GroupedShapeKey>& keys, const std::vector<int64_t>& tokens);

// Each elementwise kernel (one per (kind, cols), elementwise_timing_keys) over `rows` tokens: the
// executor's own call, back to back in a CUDA graph (profiler/measure/elementwise.cpp).
void time_elementwise_shapes(Context& ctx, const std::set<ElementwiseShapeKey>& keys, const std::vector<int64_t>& rows);

// All of `shapes` on GPU 0 of this host, which `profile` describes (the caller has checked it is
// this host's): a fresh Measurements holding only the new rows and notes. `sweep`: the profile's
// token counts and samples, so the new points match its others.
Measurements measure_shape_set(const Machine& profile, const ShapeSet& shapes, const ShapeSweep& sweep, bool progress);

// The same, timed by a child process (this binary, `profile --internal-measure-shapes`), for a
// caller that goes on to serve on the GPU: timing in the serving process left it slower
// (profiler/common/child_process.hpp says how much). The child's progress bar shares stderr.
Measurements measure_shape_set_in_child(const Machine& profile, const ShapeSet& shapes, const ShapeSweep& sweep,
                                        bool progress);

}  // namespace peerplan::profiler
