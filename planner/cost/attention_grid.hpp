#pragma once
// Attention priced from a measured 2-D grid (issue 18): prefill chunks over (q_len, context) at a
// batch of sequences, decode over (batch, context). What is interpolated is the kernel's time per
// unit of work, log(seconds / work), bilinearly in (log x, log context), x = q_len (prefill) or
// batch (decode): efficiency varies smoothly where time does not (causal work is q (c - (q-1)/2)).
// Each grid row (one x) is interpolated along its own measured contexts, then the two rows around
// x are blended. Outside the measured range the edge efficiency is used and the price is marked
// Extrapolated (the profiler measures up to the model's maximum context, so that is beyond it).
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "planner/cost/compute_cost.hpp"
#include "planner/topology/measurements.hpp"

namespace peerplan {

struct AttentionShape {
  bool prefill = false;
  int64_t batch = 1, q_len = 1, context = 1, heads = 0, kv_heads = 0, head_dim = 0;
  std::string kv_dtype = "bf16";
  int64_t v_dim = 0;  // 0: head_dim (attention_v_dim); MLA's rows are matched by it too
};

// Attended (query, key) pairs: batch x q_len new tokens, token i of a chunk seeing context - q_len + i + 1.
double attention_work(const AttentionShape& s);

// nullopt when the table holds no point of this phase and head shape (the caller then falls back).
// Points of the same batch are used for prefill; without them, batch-1 points priced per sequence.
std::optional<ComputePrice> attention_from_grid(const std::vector<AttentionTime>& table, int gpu,
                                                const AttentionShape& s);

// Held-back check: the listed points priced from the table without any of them; relative errors
// (priced / measured - 1), in the order given. Points that cannot be priced are NaN.
std::vector<double> attention_grid_holdout(const std::vector<AttentionTime>& table, const std::vector<size_t>& held);

}  // namespace peerplan
