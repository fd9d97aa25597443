#pragma once
// Sliding-window attention priced from the measured attention grid (issue 18). The grid
// (attention_grid.hpp) holds full causal attention; a windowed layer's op is priced at the grid
// shape whose work is nearest the band's, scaled to the band's work:
//  - decode: the new token reads the last min(context, window) tokens, so it is priced as a decode
//    over that context (the compiler already sets attn_context so; bounding it here again is a no-op);
//  - prefill chunk of q new tokens over a context c: the band's attended pairs B =
//    attended_pairs(q, c, window) (token p sees min(p + 1, window) keys), priced at the efficiency
//    (seconds per attended pair) of the causal chunk (q, c') whose mean keys per token equal the
//    band's, c' = B / q + (q - 1) / 2, kept within [q, c] (the grid's rows start at context = q),
//    times B. A window that does not bind (c <= window) gives c' = c: the unwindowed price exactly.
// The same number of query rows keeps the kernel's parallelism; a prompt longer than its window is
// priced at the causal prompt's efficiency (c' = q), which has as many query tiles and rows at least
// as long as the band's (an assumption checked on the GPU by the windowed profile points, not yet
// measured: the grid times full attention only). The fitted fallback prices the same shape.
#include <cstdint>
#include <optional>
#include <vector>

#include "planner/compile/op_graph.hpp"
#include "planner/cost/attention_grid.hpp"
#include "planner/cost/fitted_compute.hpp"

namespace peerplan {

// The grid shape a windowed op is priced at, and the factor (band work / that shape's work) on its
// price; window <= 0: the shape itself and 1.
AttentionShape window_priced_shape(const AttentionShape& s, int64_t window, double* work_factor);

// attention_from_grid for a layer with this window (0: full attention, attention_from_grid itself).
std::optional<ComputePrice> attention_from_grid_windowed(const std::vector<AttentionTime>& table, int gpu,
                                                         const AttentionShape& s, int64_t window);

// The fitted fallback (a profile without this head shape's grid, fitted_compute.hpp) for an
// attention op, a windowed one at the same equivalent shape and factor as the grid.
std::optional<double> fitted_attention_windowed_s(const FittedCompute& f, const Op& op);

}  // namespace peerplan
