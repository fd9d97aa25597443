#include "planner/compile/mla_memory.hpp"

#include <algorithm>

#include "planner/compile/graph_batch.hpp"
#include "planner/model/model_config.hpp"

namespace peerplan {

int64_t mla_scratch_slots(int64_t heads, int64_t max_ctx, int64_t max_tokens, int64_t qk_dim) {
  // K and V (bf16) of one sequence of max_ctx tokens per slot.
  const int64_t per_slot_bytes = 2 * 2 * heads * max_ctx * qk_dim;
  return std::clamp<int64_t>(kMlaScratchBudget / std::max<int64_t>(1, per_slot_bytes), 1,
                             std::min<int64_t>(kMlaScratchMaxSlots, std::max<int64_t>(1, max_tokens)));
}

MlaScratch mla_scratch(const ModelConfig& cfg, int64_t heads, int64_t max_ctx, int64_t max_tokens, int64_t kv_slots,
                       int sm_count) {
  MlaScratch s;
  if (!cfg.mla || heads <= 0 || max_ctx <= 0) return s;
  const int64_t qk = cfg.qk_nope_head_dim + cfg.qk_rope_head_dim;  // 192
  const int64_t kv_b = cfg.qk_nope_head_dim + cfg.v_head_dim;        // 256: a head's kv_b output
  const int64_t row = cfg.kv_lora_rank + cfg.qk_rope_head_dim;       // 576: a latent / absorbed row
  const int64_t tok_cap = std::max(max_tokens, cuda_graph_batch(kv_slots)) + 8;
  s.slots = mla_scratch_slots(heads, max_ctx, max_tokens, qk);
  s.expanded_kv = 2 * s.slots * heads * max_ctx * qk * 2;
  s.kv_b_out = (s.slots * max_ctx * heads * kv_b + 8) * 2;
  s.absorbed_q = tok_cap * heads * row * 2;
  s.attn_out = (tok_cap * heads * row + 8) * 2;
  const int sms = sm_count > 0 ? sm_count : 132;
  int64_t ws = 256;
  // Past 2 x SMs rows a batch has more CTAs than one wave at any residency: no split-K, no bytes.
  const int64_t last = std::min(std::max(cuda_graph_batch(kv_slots), max_tokens), int64_t(2) * sms);
  for (int64_t b = 1; b <= last; ++b)
    ws = std::max(ws, mla_decode_workspace_bytes_for(b, heads, max_ctx, sms, cfg.kv_lora_rank));
  s.decode_workspace = ws;
  return s;
}

}  // namespace peerplan
