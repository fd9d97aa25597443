// Plain C++ (no fmt, no planner library: one header-only planner file): the stand-alone kernel bench
// links it (bench/attention).
#include "profiler/common/attention_support.hpp"

#include <string>

#include "planner/model/decode_split.hpp"

namespace peerplan::kernels {

bool attention_head_dim_supported(int head_dim) {
  return head_dim == 64 || head_dim == 80 || head_dim == 96 || head_dim == 128 || head_dim == 192;
}

bool attention_head_dim_needs_cudnn(int head_dim) { return head_dim == 256; }

bool decode_head_dim_supported(int head_dim) { return head_dim >= 8 && head_dim <= 256 && head_dim % 8 == 0; }

DecodeVariant decode_variant(int group, int head_dim) {
  if (group < 1 || group > kMaxAttentionGroup || !decode_head_dim_supported(head_dim)) return {};
  const decode_split::Tiles t = decode_split::tiles(group, head_dim);  // the split plan's too
  DecodeVariant v;
  v.group_tile = t.group_tile, v.dim_tile = t.dim_tile, v.group_split = t.group_split;
  v.general = v.group_tile * v.group_split != group || v.dim_tile != head_dim;
  return v;
}

std::string mla_shape_refusal(int kv_lora_rank, int qk_rope_head_dim, int qk_nope_head_dim, int v_head_dim,
                              int heads_per_gpu, bool kv_fp8, const char** field) {
  using std::to_string;
  auto need = [field](const char* name, int got, int want) {
    if (field) *field = name;
    return std::string(name) + " " + to_string(got) + ": the executor's MLA kernels take " + to_string(want) +
           " (DeepSeek-V2/V3, Kimi K2)";
  };
  if (kv_lora_rank != kMlaSupportedLatent) return need("kv_lora_rank", kv_lora_rank, kMlaSupportedLatent);
  if (qk_rope_head_dim != kMlaSupportedRope) return need("qk_rope_head_dim", qk_rope_head_dim, kMlaSupportedRope);
  if (qk_nope_head_dim != kMlaSupportedNope) return need("qk_nope_head_dim", qk_nope_head_dim, kMlaSupportedNope);
  if (v_head_dim != kMlaSupportedVDim) return need("v_head_dim", v_head_dim, kMlaSupportedVDim);
  if (field) *field = heads_per_gpu < 1 || heads_per_gpu > kMlaSupportedMaxHeads ? "num_attention_heads" : "kv_cache_dtype";
  if (heads_per_gpu < 1 || heads_per_gpu > kMlaSupportedMaxHeads)
    return "num_attention_heads " + to_string(heads_per_gpu) + " per GPU: the executor's MLA decode runs 1 to " +
           to_string(kMlaSupportedMaxHeads);
  if (kv_fp8) return "an FP8 KV cache with MLA: the executor's latent cache and its kernels are bf16";
  return "";
}

std::string attention_shape_refusal(int heads, int kv_heads, int head_dim, const AttentionPath& path) {
  using std::to_string;
  if (kv_heads <= 0 || heads <= 0 || heads % kv_heads != 0)
    return "num_attention_heads " + to_string(heads) + " is not a multiple of num_key_value_heads " + to_string(kv_heads);
  if (!attention_head_dim_supported(head_dim) && !attention_head_dim_needs_cudnn(head_dim))
    return "head_dim " + to_string(head_dim) +
           ": the executor's attention runs 64, 80, 96, 128, 192 and 256 (prefill's own kernel is instantiated "
           "for those up to 192; 256 runs on cuDNN)";
  if (attention_head_dim_needs_cudnn(head_dim) && path.kv_fp8)
    return "head_dim " + to_string(head_dim) +
           " with an FP8 KV cache: prefill at 256 runs only on cuDNN, whose graph reads a bf16 cache (the own "
           "kernel runs FP8 up to head_dim 192; 256 spills registers)";
  if (attention_head_dim_needs_cudnn(head_dim) && !path.cudnn)
    return "head_dim " + to_string(head_dim) + ": prefill at 256 runs only on cuDNN, not used here (" +
           (path.no_cudnn_why.empty() ? std::string("cuDNN unavailable") : path.no_cudnn_why) +
           "; the own kernel runs up to head_dim 192)";
  if (heads / kv_heads > kMaxAttentionGroup)
    return to_string(heads / kv_heads) + " query heads per kv head (" + to_string(heads) + " / " +
           to_string(kv_heads) + "): the executor's attention runs 1 to " + to_string(kMaxAttentionGroup);
  return "";
}

}  // namespace peerplan::kernels
