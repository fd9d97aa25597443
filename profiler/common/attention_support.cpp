// Plain C++ (no fmt, no planner code): the stand-alone kernel bench links it (bench/attention).
#include "profiler/common/attention_support.hpp"

#include <string>

namespace peerplan::kernels {

bool attention_head_dim_supported(int head_dim) {
  return head_dim == 64 || head_dim == 80 || head_dim == 96 || head_dim == 128;
}

bool decode_head_dim_supported(int head_dim) { return head_dim >= 8 && head_dim <= 128 && head_dim % 8 == 0; }

DecodeVariant decode_variant(int group, int head_dim) {
  if (group < 1 || group > kMaxAttentionGroup || !decode_head_dim_supported(head_dim)) return {};
  DecodeVariant v;
  v.group_tile = 1;
  while (v.group_tile < group) v.group_tile *= 2;
  v.dim_tile = head_dim <= 64 ? 64 : 128;
  v.general = v.group_tile != group || v.dim_tile != head_dim;
  return v;
}

std::string attention_shape_refusal(int heads, int kv_heads, int head_dim) {
  using std::to_string;
  if (kv_heads <= 0 || heads <= 0 || heads % kv_heads != 0)
    return "num_attention_heads " + to_string(heads) + " is not a multiple of num_key_value_heads " + to_string(kv_heads);
  if (!attention_head_dim_supported(head_dim))
    return "head_dim " + to_string(head_dim) +
           ": the executor's attention kernels run 64, 80, 96, 128 (192 and 256 need more registers per thread "
           "than the kernels' occupancy allows)";
  if (heads / kv_heads > kMaxAttentionGroup)
    return to_string(heads / kv_heads) + " query heads per kv head (" + to_string(heads) + " / " +
           to_string(kv_heads) + "): the executor's attention runs 1 to " + to_string(kMaxAttentionGroup);
  return "";
}

}  // namespace peerplan::kernels
