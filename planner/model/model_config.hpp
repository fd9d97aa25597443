#pragma once
// A transformer LLM as described by a HuggingFace config.json, normalised across families
// (Llama, Mistral, Qwen2, Phi-3, Mixtral, Qwen-MoE, DeepSeek V2/V3, gpt-oss). Everything the planner needs
// about a model is derived from this struct (see model_figures.hpp).
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "planner/core/dtype.hpp"
#include "planner/model/quantization.hpp"
#include "planner/model/routing_model.hpp"

namespace peerplan {

struct ModelConfig {
  std::string source_file;    // where it was loaded from (for error messages and reports)
  std::string name;           // directory name or _name_or_path
  std::string architecture;   // architectures[0], e.g. "LlamaForCausalLM"
  std::string model_type;     // e.g. "llama", "mixtral", "qwen2_moe", "deepseek_v3"
  std::string dtype = "bfloat16";
  int dtype_bytes = 2;

  int64_t hidden = 0;         // hidden_size
  int64_t layers = 0;         // num_hidden_layers
  int64_t heads = 0;          // num_attention_heads
  int64_t kv_heads = 0;       // num_key_value_heads (== heads without GQA)
  int64_t head_dim = 0;       // head_dim or hidden / heads
  int64_t intermediate = 0;   // intermediate_size (dense MLP)
  int64_t vocab = 0;          // vocab_size
  int64_t max_context = 0;    // max_position_embeddings
  bool tied_embeddings = false;
  bool gated_mlp = true;      // SwiGLU (3 matrices); false for a 2-matrix MLP
  bool attention_bias = false;  // qkv bias (Qwen2)
  bool qk_norm = false;       // per-head RMSNorm on q and k (Qwen3): 2 * head_dim params per layer
  int64_t sliding_window = 0; // the config's attention window (0 = none); layer_window says where it applies
  // Per layer: the attention window of that layer (0 = full attention; empty: every layer full).
  // A windowed layer's token at position p attends to keys (p - window, p] and caches at most
  // `window` tokens (issue 18). Mistral / Mixtral / Phi-3 with a non-null sliding_window: every
  // layer (Mistral-7B-v0.1: 4096); Qwen2 / Qwen2-MoE with use_sliding_window: layers >=
  // max_window_layers; gpt-oss: layer_types alternates sliding_attention and full_attention.
  std::vector<int64_t> layer_window;
  bool attention_sinks = false;  // gpt-oss: one learned sink logit per head and layer
  bool expert_bias = false;      // gpt-oss: gate_up and down biases on every routed expert

  // Number formats (issue 15). `quant`: the checkpoint's quantization_config, or what --weights
  // asked for; kv_dtype: the KV cache (bf16/fp16 as the model's dtype, fp8 from --kv-dtype or a
  // compressed-tensors kv_cache_scheme).
  Quantization quant;
  DType kv_dtype = DType::BF16;
  DType dense_dtype() const { return dtype == "float16" ? DType::FP16 : DType::BF16; }
  int64_t kv_elem_bytes() const { return kv_dtype == DType::FP8_E4M3 ? 1 : dtype_bytes; }
  int64_t window_of(int64_t layer) const {
    return layer >= 0 && size_t(layer) < layer_window.size() ? layer_window[size_t(layer)] : 0;
  }
  // Whether any layer is windowed (the figures and the executor then bound those layers).
  bool has_windows() const {
    for (int64_t w : layer_window)
      if (w > 0) return true;
    return false;
  }

  // Mixture of experts (all zero for dense models).
  int64_t experts = 0;               // routed experts per MoE layer
  int64_t experts_per_token = 0;     // top-k
  int64_t expert_intermediate = 0;   // per routed expert
  int64_t shared_experts = 0;        // count of shared experts (DeepSeek n_shared_experts)
  int64_t shared_intermediate = 0;   // total intermediate of the shared expert(s)
  int64_t first_dense_layers = 0;    // first_k_dense_replace
  int64_t moe_layer_freq = 1;        // every n-th layer (after the dense ones) is MoE
  int64_t moe_layer_phase = 0;       // MoE when (layer + phase) % freq == 0: DeepSeek 0, Qwen-MoE 1
  std::vector<int64_t> dense_layers; // explicitly dense layers (Qwen-MoE mlp_only_layers)
  bool router_bias = false;          // DeepSeek-V3 noaux_tc: e_score_correction_bias per expert
  bool shared_expert_gate = false;   // Qwen-MoE: sigmoid gate on the shared expert
  // Which experts each token goes to (issue 14): chosen by the workload or --moe-routing, bound by
  // the command; the compiler counts routed rows with it and the executor routes with it.
  routing::RoutingSpec moe_routing;

  // Multi-head latent attention (DeepSeek). mla == false for standard attention.
  bool mla = false;
  int64_t q_lora_rank = 0;   // 0 means queries are not low-rank
  int64_t kv_lora_rank = 0;
  int64_t qk_rope_head_dim = 0;
  int64_t qk_nope_head_dim = 0;
  int64_t v_head_dim = 0;

  bool is_moe() const { return experts > 0; }
  bool is_moe_layer(int64_t layer) const;  // 0-based layer index
};

// Attended (query, key) pairs of one sequence's chunk of q_len new tokens ending a context of
// `context` tokens (positions context - q_len .. context - 1), causal, token p seeing keys
// (p - window, p] (window 0: [0, p]): the sum of min(p + 1, window) (issue 18).
inline double attended_pairs(int64_t q_len, int64_t context, int64_t window) {
  const double a = double(context - q_len + 1), b = double(context);  // keys seen by the first and last token
  if (q_len <= 0) return 0;
  if (window <= 0 || b <= double(window)) return (a + b) * (b - a + 1) / 2;
  const double w = double(window);
  if (a >= w) return double(q_len) * w;
  return (a + w) * (w - a + 1) / 2 + (b - w) * w;
}

// Loads and validates a HuggingFace config.json. Throws InputError naming the file and the field
// for: unknown architecture, missing required field, wrong type, inconsistent values (heads not
// dividing hidden size, kv heads not dividing heads, zero layers, top-k > experts, ...).
ModelConfig load_model_config(const std::string& path);
// Same from already-parsed JSON (`origin` names the file in errors).
ModelConfig parse_model_config(const std::string& json_text, const std::string& origin);

// "What if I quantize": --weights replaces the checkpoint's scheme (bf16: dense), --kv-dtype the
// KV-cache format. nullopt leaves that part as the config says. Throws InputError for a value the
// options do not offer (mxfp4 / fp16 weights, int KV caches).
struct Precision {
  std::optional<DType> weights, kv_dtype;  // --weights, --kv-dtype (nullopt: as the config says)
};
void apply_precision(ModelConfig& cfg, std::optional<DType> weights, std::optional<DType> kv_dtype);
inline void apply_precision(ModelConfig& cfg, const Precision& p) { apply_precision(cfg, p.weights, p.kv_dtype); }

// Architectures load_model_config accepts (architectures[0] values), for help and error texts.
std::vector<std::string> supported_architectures();

// A model argument as users type it: a config.json path, a directory holding config.json, or the
// name of a shipped model ("llama-3.1-8b" -> models/llm/llama-3.1-8b/config.json, found through
// find_data_file). Throws InputError listing the shipped names when none matches.
std::string resolve_model_path(const std::string& name_or_path);
std::vector<std::string> shipped_model_names();  // sorted directory names under models/llm

}  // namespace peerplan
