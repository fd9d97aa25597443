// check_attention_executable (attention_support.hpp): the model-level refusal, with the planner's
// InputError; apart from attention_support.cpp so the stand-alone kernel bench needs no planner code.
#include <fmt/format.h>

#include "planner/core/error.hpp"
#include "planner/model/model_config.hpp"
#include "profiler/common/attention_support.hpp"

namespace peerplan::kernels {

void check_attention_executable(const ModelConfig& cfg) {
  if (cfg.mla) return;
  const int heads = int(cfg.heads), kv = int(cfg.kv_heads), hd = int(cfg.head_dim);
  if (!attention_head_dim_supported(hd))
    throw InputError(cfg.source_file, "head_dim",
                     fmt::format("64, 80, 96 or 128 (the executor's attention kernels); found {}. 192 and 256 need "
                                 "more registers per thread than the kernels' occupancy allows",
                                 hd));
  if (kv <= 0 || heads % kv != 0 || heads / kv > kMaxAttentionGroup)
    throw InputError(cfg.source_file, "num_attention_heads",
                     fmt::format("at most {} query heads per kv head, a whole number (the executor's attention); "
                                 "found {} / num_key_value_heads {}",
                                 kMaxAttentionGroup, heads, kv));
}

}  // namespace peerplan::kernels
