#pragma once
// MoE routing and combine on the device (issue 14), as fused-MoE serving engines run them between
// the router GEMM and the expert GEMMs, with no host synchronisation (decode stays inside one CUDA
// graph):
//   moe_route:   softmax of the router logits [T][E]; each token's k experts from
//                planner/model/routing.hpp's route_token (the simulator prices the same choice);
//                combine weights = the chosen experts' probabilities renormalised; per-expert row
//                counts and offsets of this GPU's experts [first, first + count); the routed rows
//                sorted by expert; the list of non-empty (expert, row tile) pairs for each tile
//                height the grouped GEMM uses (vLLM's moe_align_block_size, without padding).
//   moe_combine: out[t] = sum over t's local experts j of w[t,j] * rows[row_of(t,j)] (bf16 out).
// Host-callable; every launch is checked. The grouped GEMM over the tile lists is moe_gemm.hpp.
#include <cstdint>

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "profiler/common/moe_tiles.hpp"  // tile heights, grid bound, kernel choice

namespace peerplan::kernels {

inline constexpr int kMoeMaxTopK = 16;
inline constexpr int kMoeMaxLocalExperts = 1024;

// Device buffers of one routing (sized by moe_route_buffer_ints for `cap_tokens` tokens of k).
struct MoeRouting {
  float* weights = nullptr;     // [T*k] renormalised router probability of (token, j)
  int* row_of = nullptr;        // [T*k] sorted row of (token, j), -1 when the expert is not local
  int* token_of_row = nullptr;  // [T*k] token of each sorted row (rows [offsets[e], offsets[e+1]) are expert e's)
  int* offsets = nullptr;       // [experts + 1] local expert offsets; offsets[experts] = routed rows
  int* tiles[kMoeTileKinds] = {};  // per tile height: (local expert << 20) | first row, num_tiles[i] entries
  int* num_tiles = nullptr;     // [kMoeTileKinds]
  int* counts = nullptr;        // [local experts] routed rows per expert (grid path's counters)
  int* cursor = nullptr;        // [local experts] next free row per expert (grid path's sort)
  int64_t cap_entries = 0;      // T*k capacity
  int local_experts = 0;
};

// int32 words a MoeRouting of `cap_tokens` x `topk` over `local_experts` needs in one buffer;
// moe_routing_view lays it out over such a buffer.
int64_t moe_route_buffer_ints(int64_t cap_tokens, int topk, int local_experts);
MoeRouting moe_routing_view(int* base, int64_t cap_tokens, int topk, int local_experts);

struct MoeRouteArgs {
  const __nv_bfloat16* logits = nullptr;  // [tokens][experts] router GEMM output
  int64_t tokens = 0;
  int experts = 0, topk = 0;
  int expert_first = 0, expert_count = 0;  // this GPU's experts
  uint64_t seed = 0;
  int layer = 0;
  const float* cdf = nullptr;  // device popularity CDF [experts] (routing.hpp), nullptr = uniform
};
// Batches up to this many tokens route in one CTA (one launch: decode graphs); larger ones over the
// whole GPU in four launches (clear, tokens, offsets and tiles, sort).
inline constexpr int64_t kMoeOneCtaMaxTokens = 128;
// Throws std::invalid_argument for shapes the kernel cannot take (topk, local experts, capacity).
void moe_route(const MoeRouteArgs& a, const MoeRouting& r, cudaStream_t stream);
// moe_route with the path chosen by the caller (grid or one CTA), no argument checks: for the
// self-test, which checks and times both paths on the same shapes.
void moe_route_path(const MoeRouteArgs& a, const MoeRouting& r, bool grid, cudaStream_t stream);

// out[t][:] = sum_j weights[t*k+j] * rows[row_of[t*k+j]][:] over j with row_of >= 0 (zeros when
// none): hidden = width, multiple of 8.
void moe_combine(const MoeRouting& r, const __nv_bfloat16* rows, __nv_bfloat16* out, int64_t tokens, int topk,
                 int64_t hidden, cudaStream_t stream);

}  // namespace peerplan::kernels
