// check_attention_executable (attention_support.hpp): the model-level refusal, with the planner's
// InputError; apart from attention_support.cpp so the stand-alone kernel bench needs no planner code.
#include <fmt/format.h>

#include "planner/core/error.hpp"
#include "planner/model/model_config.hpp"
#include "profiler/common/attention_support.hpp"

namespace peerplan::kernels {

void check_attention_executable(const ModelConfig& cfg, const AttentionPath& path) {
  if (cfg.mla) {
    const char* field = "";
    const std::string why = mla_shape_refusal(int(cfg.kv_lora_rank), int(cfg.qk_rope_head_dim),
                                              int(cfg.qk_nope_head_dim), int(cfg.v_head_dim), int(cfg.heads),
                                              cfg.kv_dtype == DType::FP8_E4M3, &field);
    if (!why.empty()) throw InputError(cfg.source_file, field, fmt::format("an MLA shape the executor runs: {}", why));
    return;
  }
  const int heads = int(cfg.heads), kv = int(cfg.kv_heads), hd = int(cfg.head_dim);
  AttentionPath p = path;
  p.kv_fp8 = cfg.kv_dtype == DType::FP8_E4M3;
  if (kv <= 0 || heads % kv != 0 || heads / kv > kMaxAttentionGroup)
    throw InputError(cfg.source_file, "num_attention_heads",
                     fmt::format("at most {} query heads per kv head, a whole number (the executor's attention); "
                                 "found {} / num_key_value_heads {}",
                                 kMaxAttentionGroup, heads, kv));
  const std::string why = attention_shape_refusal(heads, kv, hd, p);  // now only head_dim can refuse
  if (!why.empty())
    throw InputError(cfg.source_file, "head_dim", fmt::format("a head_dim the executor runs; found {}: {}", hd, why));
}

}  // namespace peerplan::kernels
