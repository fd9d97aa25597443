#pragma once
// What the executor allocates for multi-head latent attention beyond the weights and the latent
// KV cache (profiler/exec/engine_mla.cpp allocate_mla, engine_alloc.cpp allocate; docs/attention.md
// "MLA in the compiler, the cost model and the executor"), as one set of formulas both the executor
// and the planner's memory check (check_memory) use, so the plan refused for memory is the plan the
// executor could not allocate. CPU only: the executor passes its own max_ctx / max_tokens / slots.
#include <algorithm>
#include <cstdint>

namespace peerplan {

struct ModelConfig;  // planner/model/model_config.hpp (not included: the kernels include this header)

// Bytes of expanded K and V (together) the executor allows its prefill scratch beyond one
// sequence: several prefilling sequences per call at moderate contexts, one at long ones (vLLM
// bounds its MLA prefill workspace likewise and loops over it); at most this many sequences.
inline constexpr int64_t kMlaScratchBudget = int64_t(1) << 30;
inline constexpr int64_t kMlaScratchMaxSlots = 16;

// Sequences one prefill group expands at once: K and V (bf16, qk_dim = nope + rope wide, V padded
// to it) of one sequence of max_ctx tokens per slot within kMlaScratchBudget, at least 1, at most
// kMlaScratchMaxSlots and max_tokens (a group never holds more sequences than tokens).
int64_t mla_scratch_slots(int64_t heads, int64_t max_ctx, int64_t max_tokens, int64_t qk_dim);

// mla_decode's split-K partials (profiler/kernels/mla_decode.cu): chunks per (row, head group) =
// one wave of resident CTAs (2 per SM at 16-head tiles, 1 at 32 / 64), at most one per
// min_chunk tokens of max_ctx; bytes = batch x heads x splits x (latent + 1) fp32, 0 without
// split-K, the largest over the head tiles `heads` allows (a forced tile fits too).
inline constexpr int kMlaDecodeMinChunk = 128;
// Resident CTAs per SM at that head tile (the kernel's __launch_bounds__; mla_decode.cu asserts it).
constexpr int mla_decode_head_tile_residency(int head_tile) { return head_tile == 16 ? 2 : 1; }
// Inline (header only): mla_decode.cu and its standalone bench build (bench/attention/mla_build.sh)
// take them without linking the planner.
inline int mla_decode_split_count(int64_t batch, int64_t heads, int64_t max_ctx, int sm_count, int head_tile,
                                  int min_chunk = kMlaDecodeMinChunk) {
  const int64_t groups = (heads + head_tile - 1) / head_tile;
  const int64_t per_split = std::max<int64_t>(1, batch * groups);
  const int64_t target =
      std::max<int64_t>(1, int64_t(mla_decode_head_tile_residency(head_tile)) * std::max(sm_count, 1) / per_split);
  const int64_t hi = std::max<int64_t>(1, (max_ctx + min_chunk - 1) / min_chunk);
  return int(std::min(target, hi));
}
inline int64_t mla_decode_workspace_bytes_for(int64_t batch, int64_t heads, int64_t max_ctx, int sm_count,
                                              int64_t latent, int min_chunk = kMlaDecodeMinChunk) {
  int64_t splits = 1;
  for (int ht : {16, 32, 64})
    if (ht == 16 || heads % ht == 0)
      splits = std::max<int64_t>(splits, mla_decode_split_count(batch, heads, max_ctx, sm_count, ht, min_chunk));
  if (splits == 1) return 0;
  return batch * heads * splits * (latent + 1) * int64_t(sizeof(float));
}

// The executor's MLA buffers on one GPU holding `heads` query heads, in bytes.
struct MlaScratch {
  int64_t slots = 0;             // prefill sequences expanded per group (mla_scratch_slots)
  int64_t expanded_kv = 0;       // mla_k + mla_v: 2 x [slots][heads][max_ctx][qk_dim] bf16
  int64_t kv_b_out = 0;          // Y at a full group's kv_b output: [slots x max_ctx][heads x (nope + v)] bf16
  int64_t absorbed_q = 0;        // mla_q: the decoding tokens' [tok_cap][heads][latent + rope] bf16
  int64_t attn_out = 0;          // Z at [tok_cap][heads][latent + rope] bf16 (absorbed decode's output)
  int64_t decode_workspace = 0;  // mla_decode's split-K partials, the largest over the batches it runs
  int64_t total() const { return expanded_kv + kv_b_out + absorbed_q + attn_out + decode_workspace; }
};
// tok_cap = max(max_tokens, cuda_graph_batch(kv_slots)) + 8 (the executor's token capacity);
// decode batches 1 .. max(cuda_graph_batch(kv_slots), max_tokens). sm_count <= 0 (a machine
// file without it) is taken as 132 (H100 / H200). Zero for a model without MLA.
MlaScratch mla_scratch(const ModelConfig& cfg, int64_t heads, int64_t max_ctx, int64_t max_tokens, int64_t kv_slots,
                       int sm_count);

}  // namespace peerplan
